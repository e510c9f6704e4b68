#include "agent/agent.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "core/log.hpp"
#include "core/stats.hpp"
#include "llm/dataset.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "loadgen/agent_wire.hpp"
#include "loadgen/load_plan.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::agent {

namespace {

// What the agent says of its share with its last records.
loadgen::ShareSummary share_summary(const Result<loadgen::StepResult>& result, double lag_p99_ms, std::uint64_t sent) {
  loadgen::ShareSummary s;
  s.lag_p99_ms = std::isfinite(lag_p99_ms) ? std::max(0.0, lag_p99_ms) : 0.0;
  if (!result) return s;
  s.cpu_s = result->generator_cpu_s;
  s.loop_delay_p99_ms = result->loop_delay_p99_ms;
  s.loop_delay_max_ms = result->loop_delay_max_ms;
  s.peak_connections = result->peak_connections;
  s.sent = sent;
  if (result->sessions) {
    const loadgen::SessionCounts& c = *result->sessions;
    s.sessions = loadgen::ShareSummary::Sessions{c.started, c.completed, c.cut, c.broken, c.turns_sent};
  }
  return s;
}

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A batch of records under capsweepd's body limit.
constexpr std::size_t kBatchBytes = 256 * 1024;

// The records a step's engine thread hands over, waiting to be sent in batches, and the
// schedule lags of the requests ended so far (a histogram: memory and a percentile's cost
// bounded however long the step). Thread-safe; the sender waits on it, not in a poll loop.
class Outbox {
 public:
  void add(std::uint64_t index, const RequestRecord& rec) {
    json r = loadgen::encode_record(index, rec);
    bool full = false;
    {
      std::lock_guard lock(m_);
      full = bytes_ <= kBatchBytes;
      bytes_ += 96 + 12 * rec.chunks.size();
      full = full && bytes_ > kBatchBytes;
      batch_.push_back(std::move(r));
      lags_.add(to_ms(rec.dispatched - rec.scheduled));
      ++ended_;
    }
    if (full) woken_.notify_all();  // the batch just passed its size: send it now
  }
  // The engine ended: the sender stops waiting.
  void close() {
    {
      std::lock_guard lock(m_);
      closed_ = true;
    }
    woken_.notify_all();
  }
  // Waits until `until`, a batch over its size, or close().
  void wait(Clock::time_point until) const {
    std::unique_lock lock(m_);
    woken_.wait_until(lock, until, [this] { return closed_ || bytes_ > kBatchBytes; });
  }
  std::size_t bytes() const {
    std::lock_guard lock(m_);
    return bytes_;
  }
  std::uint64_t ended() const {
    std::lock_guard lock(m_);
    return ended_;
  }
  std::vector<json> take() {
    std::lock_guard lock(m_);
    std::vector<json> out;
    out.swap(batch_);
    bytes_ = 0;
    return out;
  }
  // Returns the records of `all` from `from` on to the batch.
  void put_back(std::vector<json>& all, std::size_t from) {
    std::lock_guard lock(m_);
    for (std::size_t i = from; i < all.size(); ++i) {
      bytes_ += all[i].dump().size();
      batch_.push_back(std::move(all[i]));
    }
  }
  // The schedule lag p99 so far (within the histogram's 1%).
  double lag_p99() const {
    std::lock_guard lock(m_);
    return lags_.percentile(99);
  }

 private:
  mutable std::mutex m_;
  mutable std::condition_variable woken_;
  std::vector<json> batch_;
  std::size_t bytes_ = 0;
  SampleSet lags_{0};  // schedule lag (ms) of the requests ended so far: histogram only
  std::uint64_t ended_ = 0;
  bool closed_ = false;
};

std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// What capsweepd answered: its status (0: not reached) and body.
struct Reply {
  int status = 0;
  json body;
  std::string error;
};

class Agent {
 public:
  explicit Agent(const AgentOptions& o)
      : o_(o), api_(o.server, o.token, std::chrono::milliseconds(30'000), "capsweep-agent") {}

  int run();

 private:
  Reply post(const std::string& path, json body) const;
  json ids() const { return {{"run_id", o_.run}, {"index", o_.index}, {"epoch", o_.epoch}}; }
  // Why an answer ends the agent (its exit code), if it does.
  std::optional<int> refused(const Reply& r, const char* what) const;
  void sync_clock();
  // Makes a step's settings from the offer; the ready message to acknowledge it with.
  json prepare(const json& offer);
  void run_step(std::uint64_t seq, std::int64_t t0_ns);
  // Whether the go came after t0 (then capsweepd is told by how much, and nothing is sent).
  bool went_late(const json& base, Clock::time_point t0) const;
  // A step's heartbeat (sent, in flight, lag); why, when capsweepd answers that it stopped the step.
  std::optional<std::string> beat(const json& base, const Outbox& out) const;
  // A step's last records, in batches under capsweepd's body limit, the final one marked done.
  void send_last(Outbox& out, const json& base, const json& summary) const;
  // Registers with capsweepd (it may not be up yet: retried until give_up); an exit code when
  // the agent ends here.
  std::optional<int> register_until(Clock::time_point deadline) const;

  AgentOptions o_;
  cli::ApiClient api_;
  std::optional<loadgen::ClockEstimate> clock_;
  // The step prepared: its sequence, settings and runner (the workload made once per job).
  std::uint64_t seq_ = 0;
  std::optional<loadgen::StepSpec> spec_;
  std::string runner_key_;  // the job and target the runner was made for
  std::unique_ptr<loadgen::StepRunner> runner_;
};

Reply Agent::post(const std::string& path, json body) const {
  const cli::HttpAnswer a = api_.request("POST", "/v1/agents/" + path, body.dump());
  Reply r;
  r.status = a.status;
  r.error = a.error;
  if (a.status != 0) r.body = json::parse(a.body, nullptr, false);
  return r;
}

std::optional<int> Agent::refused(const Reply& r, const char* what) const {
  if (r.status == 401 || r.status == 403) {
    log::error(fmt::format("capsweep-agent: {} refused: capsweepd does not take this token ({})", what, r.status));
    return 2;
  }
  if (r.status == 409) {
    log::error(fmt::format("capsweep-agent: {} refused: {}", what,
                           r.body.is_object() ? r.body.value("/error/message"_json_pointer, std::string()) : ""));
    return 2;
  }
  if (r.status == 400) {
    log::error(fmt::format("capsweep-agent: {}: capsweepd refused the message: {}", what,
                           r.body.is_object() ? r.body.dump() : std::string()));
    return 2;
  }
  return std::nullopt;
}

void Agent::sync_clock() {
  // Every exchange on one kept-alive connection: no connect, no accept in the round trip, so
  // the smallest one bounds the offset as tightly as the path allows.
  namespace beast = boost::beast;
  namespace bhttp = boost::beast::http;
  std::vector<loadgen::ClockSample> samples;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(resolver.resolve(o_.server.host, o_.server.port));
    beast::flat_buffer buffer;
    for (int i = 0; i < o_.clock_exchanges; ++i) {
      bhttp::request<bhttp::string_body> req{bhttp::verb::post, o_.server.base + "/v1/agents/clock", 11};
      req.set(bhttp::field::host, o_.server.host);
      req.set(bhttp::field::user_agent, "capsweep-agent");
      if (!o_.token.empty()) req.set(bhttp::field::authorization, "Bearer " + o_.token);
      req.set(bhttp::field::content_type, "application/json");
      req.keep_alive(true);
      const auto t1 = Clock::now();
      req.body() = json{{"t1_ns", ns_of(t1)}}.dump();
      req.prepare_payload();
      stream.expires_after(std::chrono::seconds(10));
      bhttp::write(stream, req);
      bhttp::response<bhttp::string_body> res;
      bhttp::read(stream, buffer, res);
      const auto t4 = Clock::now();
      if (res.result_int() != 200) break;
      const json body = json::parse(res.body(), nullptr, false);
      if (!body.is_object()) break;
      samples.push_back(
          {ns_of(t1), body.value("t2_ns", std::int64_t{0}), body.value("t3_ns", std::int64_t{0}), ns_of(t4)});
      if (!res.keep_alive()) break;
    }
  } catch (const std::exception& e) {
    log::error(fmt::format("capsweep-agent: clock exchange: {}", e.what()));
  }
  if (auto e = loadgen::estimate_clock(samples)) clock_ = e;
}

// The runner of a step's target and workload (its dataset parsed, capsweepd's calibration).
Result<std::unique_ptr<loadgen::StepRunner>> make_runner(const loadgen::AgentStep& step) {
  auto target = llm::parse_target(step.target, "/payload/target");
  if (!target) return target.error();
  llm::WorkloadSpec spec;
  if (!step.workload.empty()) {
    auto parsed = llm::parse_workload(step.workload, "/payload/workload");
    if (!parsed) return parsed.error();
    spec = std::move(*parsed);
  }
  auto fitted = llm::fit_to_api(std::move(spec), target->api, "/payload/workload");
  if (!fitted) return fitted.error();
  spec = std::move(*fitted);
  std::vector<llm::DatasetEntry> entries;
  if (step.dataset) {
    auto parsed = llm::parse_dataset(
        llm::parse_dataset_format(step.dataset_format.value_or("jsonl")).value_or(llm::DatasetFormat::jsonl),
        *step.dataset);
    if (!parsed) return Error{errc::parse_error, "its dataset: " + parsed.error().message, "/payload/dataset"};
    entries = std::move(parsed->entries);
  }
  auto workload = std::make_shared<const llm::Workload>(
      spec, llm::PromptSynth(step.tokens_per_word, spec.prefix, spec.seed), std::move(entries));
  return std::make_unique<loadgen::StepRunner>(std::move(*target), std::move(workload));
}

json Agent::prepare(const json& offer) {
  seq_ = offer.value("step", std::uint64_t{0});
  spec_.reset();
  json ready = {{"step", seq_}};
  auto fail = [&](const std::string& why) {
    ready["error"] = why;
    log::error(fmt::format("capsweep-agent: step {} cannot be made: {}", seq_, why));
    return ready;
  };
  auto step = loadgen::parse_agent_step(offer.value("payload", json()));
  if (!step) return fail(fmt::format("{} ({})", step.error().message, step.error().field));
  // The workload is made once per job and target (its prompts are the same every step).
  const std::string key = step->load.job_id + "\n" + step->target.dump();
  if (!runner_ || runner_key_ != key) {
    auto made = make_runner(*step);
    if (!made) return fail(fmt::format("{} ({})", made.error().message, made.error().field));
    runner_ = std::move(*made);
    runner_key_ = key;
  }
  auto ss = loadgen::plan_load_step(step->load, runner_->workload().trace_offsets());
  if (!ss) return fail(ss.error().message);
  const auto parts = offer.value("parts", std::uint32_t{1});
  const auto part = offer.value("part", std::uint32_t{0});
  ss->slice = loadgen::StepSlice{part, parts};
  ss->warm_prefixes = false;  // capsweepd warms the cache once, before the go
  ss->metrics_url.clear();    // and scrapes the target's gauges itself
  ss->prometheus.reset();
  ss->engine_threads = 1;
  auto digest = runner_->schedule_digest(*ss, parts);
  if (!digest) return fail(digest.error().message);
  ready["digest"] = fmt::format("{:016x}", *digest);
  spec_ = std::move(*ss);
  return ready;
}

void Agent::run_step(std::uint64_t seq, std::int64_t t0_ns) {
  // t0 on this process's clock, converted once.
  const Clock::time_point t0{std::chrono::nanoseconds(t0_ns - clock_->offset_ns)};
  json base = ids();
  base["step"] = seq;
  if (went_late(base, t0)) return;
  loadgen::StepSpec ss = *spec_;
  ss.start_at = t0;
  Outbox out;
  ss.on_record = [&out](std::uint64_t index, const RequestRecord& rec) { out.add(index, rec); };
  std::atomic<bool> finished{false};
  Result<loadgen::StepResult> result = Error{errc::internal, "not run", ""};
  std::thread engine([&] {
    result = runner_->run(ss);
    finished = true;
    out.close();
  });
  bool aborted = false;
  auto flush = [&] {
    json msg = base;
    msg["records"] = out.take();
    msg["done"] = false;
    const Reply r = post("records", std::move(msg));
    if (r.status == 200 && r.body.is_object() && r.body.value("state", "") == "abort" && !aborted) {
      aborted = true;
      runner_->cancel();
    }
  };
  auto last_beat = Clock::now() - std::chrono::seconds(1);
  auto last_flush = Clock::now();
  while (!finished) {
    out.wait(std::min(last_flush + std::chrono::milliseconds(250), last_beat + std::chrono::seconds(1)));
    const auto now = Clock::now();
    const std::size_t bytes = out.bytes();
    if (bytes > kBatchBytes || now - last_flush >= std::chrono::milliseconds(250)) {
      if (bytes > 0) flush();
      last_flush = now;
    }
    if (now - last_beat >= std::chrono::seconds(1)) {
      last_beat = now;
      if (const auto why = beat(base, out); why && !aborted) {
        aborted = true;
        log::info(fmt::format("capsweep-agent: step {}: capsweepd stopped it ({})", seq, *why));
        runner_->cancel();
      }
    }
  }
  engine.join();
  const json summary = loadgen::encode_summary(share_summary(result, out.lag_p99(), runner_->progress().sent.load()));
  if (!result) log::error(fmt::format("capsweep-agent: step {} could not run: {}", seq, result.error().message));
  send_last(out, base, summary);
  log::info(
      fmt::format("capsweep-agent: step {} done: {} requests ended{}", seq, out.ended(), aborted ? " (stopped)" : ""));
}

bool Agent::went_late(const json& base, Clock::time_point t0) const {
  const double late_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (late_ms <= 0) return false;
  // Sending now would shift the whole share: the step is invalid, and capsweepd is told why.
  json hb = base;
  hb["late_go_ms"] = late_ms;
  post("heartbeat", hb);
  log::error(
      fmt::format("capsweep-agent: step {}: go came {:.1f} ms after t0; not sent", base.value("step", 0), late_ms));
  return true;
}

std::optional<std::string> Agent::beat(const json& base, const Outbox& out) const {
  json hb = base;
  const loadgen::Progress& p = runner_->progress();
  hb["sent"] = p.sent.load();
  hb["in_flight"] = p.in_flight.load();
  hb["lag_p99_ms"] = out.lag_p99();
  const Reply r = post("heartbeat", hb);
  if (r.status != 200 || !r.body.is_object() || r.body.value("state", "") != "abort") return std::nullopt;
  return r.body.value("why", std::string());
}

void Agent::send_last(Outbox& out, const json& base, const json& summary) const {
  while (out.bytes() > kBatchBytes) {
    // Split: send the first half now.
    std::vector<json> all = out.take();
    const std::size_t half = all.size() / 2;
    json msg = base;
    msg["records"] = std::vector<json>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(half));
    msg["done"] = false;
    post("records", std::move(msg));
    out.put_back(all, half);
  }
  json msg = base;
  msg["records"] = out.take();
  msg["done"] = true;
  msg["summary"] = summary;
  post("records", std::move(msg));
}

std::optional<int> Agent::register_until(Clock::time_point deadline) const {
  while (true) {
    const Reply r = post("register", ids());
    if (auto code = refused(r, "registration")) return *code;
    if (r.status == 200 && r.body.is_object()) {
      if (r.body.value("state", "") == "done") return 0;
      return std::nullopt;
    }
    if (Clock::now() > deadline) {
      log::error(fmt::format("capsweep-agent: capsweepd could not be reached: {}",
                             r.error.empty() ? std::to_string(r.status) : r.error));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Agent::run() {
  const auto deadline_from = [this] { return Clock::now() + o_.give_up; };
  if (auto code = register_until(deadline_from())) return *code;
  log::info(fmt::format("capsweep-agent: agent {} of run {} registered (epoch {})", o_.index, o_.run, o_.epoch));
  sync_clock();
  std::optional<json> ready;
  auto deadline = deadline_from();
  while (true) {
    json msg = ids();
    if (clock_) {
      msg["clock"] = {{"offset_ms", static_cast<double>(clock_->offset_ns) / 1e6},
                      {"error_ms", static_cast<double>(clock_->error_ns) / 1e6}};
    }
    if (ready) msg["ready"] = *ready;
    const Reply r = post("poll", msg);
    if (auto code = refused(r, "poll")) return *code;
    if (r.status == 404) {
      // capsweepd restarted and forgot us: register again.
      const Reply again = post("register", ids());
      if (auto code = refused(again, "registration")) return *code;
    }
    if (r.status != 200 || !r.body.is_object()) {
      if (Clock::now() > deadline) {
        log::error("capsweep-agent: capsweepd could not be reached; giving up");
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    ready.reset();
    const std::string state = r.body.value("state", "");
    if (state == "done") {
      log::info(fmt::format("capsweep-agent: run {} is done", o_.run));
      return 0;
    }
    if (state == "step") {
      sync_clock();  // fresh for each step's go
      ready = prepare(r.body);
      deadline = deadline_from();
      continue;
    }
    if (state == "go" && spec_ && r.body.value("step", std::uint64_t{0}) == seq_ && clock_) {
      run_step(seq_, r.body.value("t0_ns", std::int64_t{0}));
      spec_.reset();
      deadline = deadline_from();
      continue;
    }
    if (Clock::now() > deadline) {
      log::error(fmt::format("capsweep-agent: no step for {} s; giving up", o_.give_up.count() / 1000));
      return 1;
    }
    std::this_thread::sleep_for(o_.poll);
  }
}

}  // namespace

int run_agent(const AgentOptions& options) {
  return Agent(options).run();
}

}  // namespace capsweep::agent

#include "loadgen/agent_hub.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace capsweep::loadgen {

using json = nlohmann::json;

namespace {

std::string hex(std::uint64_t v) {
  return fmt::format("{:016x}", v);
}

std::int64_t steady_ns(SteadyClock::time_point t) {
  return std::chrono::duration_cast<Nanos>(t.time_since_epoch()).count();
}

// A whole number field of at least 0 and at most `most`.
std::optional<std::uint64_t> whole(const json& msg, const char* key, std::uint64_t most) {
  const auto it = msg.find(key);
  if (it == msg.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) return std::nullopt;
  const auto v = it->get<std::uint64_t>();
  if (v > most) return std::nullopt;
  return v;
}

double number_or(const json& msg, const char* key, double fallback) {
  const auto it = msg.find(key);
  return it != msg.end() && it->is_number() ? it->get<double>() : fallback;
}

const json kDone = {{"state", "done"}};

// An answer as a result (json converts to too much for the implicit conversion).
Result<json> answer(json j) {
  return Result<json>(boost::system::in_place_value, std::move(j));
}

}  // namespace

AgentHub::AgentHub(AgentHubSettings settings) : settings_(settings) {}

Result<AgentHub::Who> AgentHub::identify(const json& msg, bool registering, std::optional<std::uint32_t> job_parts) {
  if (!msg.is_object()) return invalid("", "an agent message is a JSON object");
  const auto run_it = msg.find("run_id");
  if (run_it == msg.end() || !run_it->is_string() || run_it->get<std::string>().empty() ||
      run_it->get<std::string>().size() > 128) {
    return invalid("/run_id", "run_id must be the job's id (1 to 128 characters)");
  }
  const auto index = whole(msg, "index", 4095);
  if (!index) return invalid("/index", "index must be a whole number from 0 to 4095 (the Job's completion index)");
  const auto epoch = whole(msg, "epoch", UINT64_MAX);
  if (!epoch) return invalid("/epoch", "epoch must be a whole number of at least 0");
  const std::string run_id = run_it->get<std::string>();
  Who who;
  who.index = static_cast<std::uint32_t>(*index);
  who.epoch = *epoch;
  if (closed_.count(run_id) != 0) return who;  // run == nullptr: the job has ended
  auto found = find_run(run_id, registering, job_parts);
  if (!found) return found.error();
  Run& r = **found;
  if (who.index >= r.parts && r.agents.count(who.index) == 0) return who;  // the run needs fewer agents: done
  auto agent_found = r.agents.find(who.index);
  if (agent_found == r.agents.end()) {
    if (!registering)
      return Error{errc::not_found,
                   fmt::format("agent {} of run {} is not registered: register first", who.index, run_id), "/index"};
    agent_found = r.agents.emplace(who.index, Agent{who.epoch}).first;
  }
  Agent& a = agent_found->second;
  if (who.epoch < a.epoch) {
    return Error{errc::conflict,
                 fmt::format("agent {} of run {} is at epoch {} here: epoch {} is an older agent's, refused", who.index,
                             run_id, a.epoch, who.epoch),
                 "/epoch"};
  }
  if (who.epoch > a.epoch) {
    if (!registering)
      return Error{errc::not_found,
                   fmt::format("agent {} of run {} has a new epoch: register first", who.index, run_id), "/epoch"};
    // A replaced agent (the Job's new pod for its index): the one it replaced is gone. If that
    // one held a share of the step in flight, the step lost its load.
    if ((r.phase == Phase::offered || r.phase == Phase::go) && who.index < r.shares.size() &&
        r.shares[who.index].acked && !r.shares[who.index].done) {
      set_fault(r, who.index,
                fmt::format("agent {} was replaced mid-step (epoch {} by {})", who.index, a.epoch, who.epoch));
    }
    a = Agent{who.epoch};
  }
  a.last_seen = SteadyClock::now();
  who.run = &r;
  who.agent = &a;
  return who;
}

Result<AgentHub::Run*> AgentHub::find_run(const std::string& run_id, bool registering,
                                          std::optional<std::uint32_t> job_parts) {
  if (auto found = runs_.find(run_id); found != runs_.end()) return &found->second;
  if (!registering)
    return Error{errc::not_found, fmt::format("no agent of run {} is registered: register first", run_id), "/run_id"};
  if (!job_parts) return Error{errc::not_found, fmt::format("no job {} runs on load agents here", run_id), "/run_id"};
  const auto waiting = std::count_if(runs_.begin(), runs_.end(), [](const auto& e) { return !e.second.opened; });
  if (static_cast<std::size_t>(waiting) >= kWaitingRuns) {
    return Error{errc::unavailable,
                 fmt::format("agents of {} jobs already wait for their jobs to start: try again later", waiting),
                 "/run_id"};
  }
  // Agents may come before their job is claimed: the run waits for them.
  Run& r = runs_.emplace(run_id, Run{}).first->second;
  r.parts = std::max<std::uint32_t>(*job_parts, 1);
  return &r;
}

void AgentHub::set_fault(Run& r, std::uint32_t index, std::string why) {
  if (!r.fault.empty()) return;  // the first fault is the step's
  r.fault = std::move(why);
  r.fault_agent = index;
  changed_.notify_all();
}

json AgentHub::tell(const Run& r, std::uint32_t index) const {
  if (r.parts > 0 && index >= r.parts) return kDone;  // the run needs fewer agents
  const bool in_step = r.phase == Phase::offered || r.phase == Phase::go;
  if (in_step && !r.fault.empty()) return {{"state", "abort"}, {"step", r.seq}, {"why", r.fault}};
  if (r.phase == Phase::offered && index < r.shares.size() && !r.shares[index].acked) {
    return {{"state", "step"}, {"step", r.seq},           {"parts", r.parts},
            {"part", index},   {"digest", hex(r.digest)}, {"payload", r.payload}};
  }
  if (r.phase == Phase::go && index < r.shares.size() && !r.shares[index].done) {
    return {{"state", "go"}, {"step", r.seq}, {"t0_ns", steady_ns(r.t0)}};
  }
  return {{"state", "wait"}};
}

Result<json> AgentHub::register_agent(const json& msg, std::optional<std::uint32_t> job_parts) {
  std::lock_guard lock(m_);
  auto who = identify(msg, true, job_parts);
  if (!who) return who.error();
  if (!who->run) return answer(kDone);
  return answer({{"state", "registered"},
                 {"run_id", msg["run_id"]},
                 {"index", who->index},
                 {"epoch", who->epoch},
                 {"parts", who->run->parts}});
}

Result<json> AgentHub::poll(const json& msg) {
  std::lock_guard lock(m_);
  auto who = identify(msg, false);
  if (!who) return who.error();
  if (!who->run) return answer(kDone);
  Run& r = *who->run;
  Agent& a = *who->agent;
  if (const auto c = msg.find("clock"); c != msg.end()) {
    if (!c->is_object() || !c->contains("offset_ms") || !(*c)["offset_ms"].is_number() || !c->contains("error_ms") ||
        !(*c)["error_ms"].is_number() || (*c)["error_ms"].get<double>() < 0) {
      return invalid("/clock", "clock must be {\"offset_ms\": number, \"error_ms\": number of at least 0}");
    }
    a.offset_ms = (*c)["offset_ms"].get<double>();
    a.offset_error_ms = (*c)["error_ms"].get<double>();
  }
  if (const auto ready = msg.find("ready"); ready != msg.end()) {
    if (!ready->is_object() || !whole(*ready, "step", UINT64_MAX)) {
      return invalid("/ready/step", "ready names the step it acknowledges");
    }
    const std::uint64_t step = (*ready)["step"].get<std::uint64_t>();
    if (step == r.seq && r.phase == Phase::offered && who->index < r.shares.size() && r.fault.empty()) {
      Share& s = r.shares[who->index];
      const std::string error = ready->value("error", std::string());
      const std::string digest = ready->value("digest", std::string());
      if (!error.empty()) {
        set_fault(r, who->index, fmt::format("agent {} could not make the step: {}", who->index, error));
      } else if (digest != hex(r.digest)) {
        set_fault(r, who->index,
                  fmt::format("agent {} made schedule digest {} where capsweepd made {}: not one schedule", who->index,
                              digest.substr(0, 32), hex(r.digest)));
      } else if (a.offset_error_ms > to_ms(settings_.max_offset_error)) {
        set_fault(r, who->index,
                  fmt::format("agent {} knows capsweepd's clock only within {:.3f} ms (above {:.3f} ms)", who->index,
                              a.offset_error_ms, to_ms(settings_.max_offset_error)));
      } else {
        s.acked = true;
        s.epoch = who->epoch;
        s.report.epoch = who->epoch;
        s.report.offset_ms = a.offset_ms;
        s.report.offset_error_ms = a.offset_error_ms;
        changed_.notify_all();
      }
    }
  }
  return answer(tell(r, who->index));
}

Result<json> AgentHub::heartbeat(const json& msg) {
  std::lock_guard lock(m_);
  auto who = identify(msg, false);
  if (!who) return who.error();
  if (!who->run) return answer(kDone);
  Run& r = *who->run;
  const auto step = whole(msg, "step", UINT64_MAX);
  if (!step) return invalid("/step", "step must name the step the agent runs");
  if (*step != r.seq || r.phase != Phase::go || !r.fault.empty() || who->index >= r.shares.size()) {
    return answer({{"state", "abort"}, {"step", *step}, {"why", r.fault.empty() ? "not the step in flight" : r.fault}});
  }
  AgentShare& rep = r.shares[who->index].report;
  rep.sent = whole(msg, "sent", UINT64_MAX).value_or(rep.sent);
  rep.in_flight = whole(msg, "in_flight", UINT64_MAX).value_or(rep.in_flight);
  rep.lag_p99_ms = number_or(msg, "lag_p99_ms", rep.lag_p99_ms);
  const double late = number_or(msg, "late_go_ms", 0);
  if (late > 0) {
    rep.late_go_ms = late;
    set_fault(r, who->index, fmt::format("agent {} got its go {:.1f} ms after t0", who->index, late));
    return answer({{"state", "abort"}, {"step", *step}, {"why", r.fault}});
  }
  return answer({{"state", "run"}, {"step", *step}});
}

namespace {

// A records message, read whole before anything of it is kept.
struct RecordsMessage {
  std::uint64_t step = 0;
  std::vector<IndexedRecord> records;
  std::optional<ShareSummary> done;  // the agent's summary, when the batch is its last
};

Result<RecordsMessage> read_records(const json& msg) {
  const auto list = msg.is_object() ? msg.find("records") : msg.end();
  if (list == msg.end() || !list->is_array()) return invalid("/records", "records must be an array of records");
  RecordsMessage out;
  const auto step = whole(msg, "step", UINT64_MAX);
  if (!step) return invalid("/step", "step must name the step the records are of");
  out.step = *step;
  out.records.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto rec = decode_record((*list)[i], fmt::format("/records/{}", i));
    if (!rec) return rec.error();
    out.records.push_back(std::move(*rec));
  }
  const auto done = msg.find("done");
  if (done != msg.end() && !done->is_boolean()) return invalid("/done", "done must be true or false");
  if (done != msg.end() && done->get<bool>()) {
    auto summary = decode_summary(msg.value("summary", json::object()), "/summary");
    if (!summary) return summary.error();
    out.done = *summary;
  } else if (msg.contains("summary")) {
    return invalid("/summary", "a summary comes with the last batch (done: true) only");
  }
  return out;
}

}  // namespace

Result<json> AgentHub::records(const json& msg) {
  // Read and decoded before the lock (a large batch does not hold the other agents up), and
  // whole before anything is kept: a malformed message changes nothing.
  auto got = read_records(msg);
  if (!got) return got.error();
  std::lock_guard lock(m_);
  auto who = identify(msg, false);
  if (!who) return who.error();
  if (!who->run) return answer(kDone);
  Run& r = *who->run;
  if (got->step != r.seq || r.phase != Phase::go || who->index >= r.shares.size() || r.shares[who->index].done) {
    return answer({{"state", "abort"}, {"step", got->step}, {"why", "not the step in flight"}});
  }
  const std::size_t received = got->records.size();
  if (r.fault.empty()) take_records(r, who->index, got->records, got->done);
  const bool abort = !r.fault.empty();
  return answer({{"state", abort ? "abort" : "run"}, {"step", got->step}, {"received", received}});
}

void AgentHub::take_records(Run& r, std::uint32_t index, std::vector<IndexedRecord>& batch,
                            const std::optional<ShareSummary>& done) {
  Share& s = r.shares[index];
  if (auto why = s.ledger.take(batch, r.records); !why.empty()) {
    set_fault(r, index, std::move(why));
    return;
  }
  s.report.records = s.ledger.records();
  if (!done) return;
  AgentShare& rep = s.report;
  rep.cpu_s = done->cpu_s;
  rep.loop_delay_p99_ms = done->loop_delay_p99_ms;
  rep.loop_delay_max_ms = done->loop_delay_max_ms;
  rep.peak_connections = done->peak_connections;
  rep.lag_p99_ms = done->lag_p99_ms;
  rep.sent = done->sent;
  if (done->sessions) {
    const ShareSummary::Sessions& c = *done->sessions;
    rep.sessions.started = c.started;
    rep.sessions.completed = c.completed;
    rep.sessions.cut = c.cut;
    rep.sessions.broken = c.broken;
    rep.sessions.turns_sent = c.turns_sent;
  }
  rep.in_flight = 0;
  rep.done = s.done = true;
  if (auto why = s.ledger.complete(); !why.empty()) set_fault(r, index, std::move(why));
  changed_.notify_all();
}

void AgentHub::open_run(const std::string& run, std::uint32_t parts) {
  std::lock_guard lock(m_);
  closed_.erase(run);
  Run& r = runs_[run];
  r.parts = std::max<std::uint32_t>(parts, 1);
  r.opened = true;
}

void AgentHub::close_run(const std::string& run) {
  std::lock_guard lock(m_);
  runs_.erase(run);
  remember_closed(run);
  changed_.notify_all();
}

void AgentHub::remember_closed(const std::string& run) {
  if (!closed_.insert(run).second) return;
  closed_order_.push_back(run);
  if (closed_order_.size() <= kClosedKept) return;
  closed_.erase(closed_order_.front());
  closed_order_.pop_front();
}

AgentsStep AgentHub::run_step(const std::string& run, const json& payload, std::uint64_t digest,
                              std::shared_ptr<const StepExpectation> expect, Nanos length,
                              const std::function<bool()>& cancelled,
                              const std::function<void(SteadyClock::time_point)>& on_go) {
  std::unique_lock lock(m_);
  Run& r = runs_[run];
  if (r.parts == 0) r.parts = 1;
  ++r.seq;
  r.phase = Phase::offered;
  r.payload = payload;
  r.digest = digest;
  r.expect = std::move(expect);
  r.shares.assign(r.parts, Share{});
  for (std::uint32_t i = 0; i < r.parts; ++i) {
    r.shares[i].report.index = i;
    r.shares[i].ledger = ShareLedger(r.expect.get(), i, r.parts);
  }
  r.records.clear();
  r.fault.clear();
  r.fault_agent.reset();
  AgentsStep out;
  const auto join_deadline = SteadyClock::now() + settings_.join_timeout;
  while (true) {
    changed_.wait_for(lock, std::chrono::milliseconds(50));
    const auto now = SteadyClock::now();
    if (cancelled && cancelled()) {
      out.cancelled = true;
      set_fault(r, 0, "the step was cancelled");
      break;
    }
    if (!r.fault.empty()) break;
    if (r.phase == Phase::offered) {
      const auto missing = std::find_if(r.shares.begin(), r.shares.end(), [](const Share& s) { return !s.acked; });
      if (missing == r.shares.end()) {
        r.t0 = now + settings_.go_lead;
        r.phase = Phase::go;
        out.t0 = r.t0;
        // Every agent is alive now: the loss clock starts at the go.
        for (auto& [i, a] : r.agents) a.last_seen = std::max(a.last_seen, now);
        changed_.notify_all();
        if (on_go) {
          lock.unlock();
          on_go(r.t0);
          lock.lock();
        }
        continue;
      }
      if (now > join_deadline) {
        const auto i = static_cast<std::uint32_t>(missing - r.shares.begin());
        set_fault(
            r, i,
            r.agents.count(i) != 0
                ? fmt::format("agent {} did not acknowledge the step within {:.0f} s", i, to_s(settings_.join_timeout))
                : fmt::format("agent {} did not register within {:.0f} s", i, to_s(settings_.join_timeout)));
        break;
      }
      continue;
    }
    // Go: until every agent has sent its last records.
    bool all_done = true;
    for (std::uint32_t i = 0; i < r.parts; ++i) {
      if (r.shares[i].done) continue;
      all_done = false;
      const auto agent = r.agents.find(i);
      const auto silent = agent == r.agents.end() ? settings_.heartbeat_loss : now - agent->second.last_seen;
      if (silent >= settings_.heartbeat_loss) {
        set_fault(r, i, fmt::format("agent {} was lost: no heartbeat for {:.1f} s", i, to_s(silent)));
        break;
      }
      if (now > r.t0 + length + settings_.end_grace) {
        set_fault(r, i,
                  fmt::format("agent {} did not send its last records by the step's drain deadline + {:.0f} s", i,
                              to_s(settings_.end_grace)));
        break;
      }
    }
    if (all_done || !r.fault.empty()) break;
  }
  out.outcome.parts = r.parts;
  out.outcome.run = run;
  for (const Share& s : r.shares) out.outcome.agents.push_back(s.report);
  out.outcome.invalid = r.fault;
  out.outcome.invalid_agent = r.fault_agent;
  out.records = std::move(r.records);
  r.records.clear();
  // Agents still running hear "abort" at their next heartbeat; a completed step is over.
  if (r.fault.empty()) r.phase = Phase::ended;
  return out;
}

json AgentHub::status(const std::string& run) const {
  std::lock_guard lock(m_);
  const auto found = runs_.find(run);
  if (found == runs_.end()) return nullptr;
  const Run& r = found->second;
  json agents = json::array();
  const auto now = SteadyClock::now();
  for (const auto& [i, a] : r.agents) {
    agents.push_back({{"index", i},
                      {"epoch", a.epoch},
                      {"seen_s_ago", to_s(now - a.last_seen)},
                      {"offset_ms", a.offset_ms},
                      {"offset_error_ms", a.offset_error_ms}});
  }
  return {{"run_id", run}, {"parts", r.parts}, {"step", r.seq}, {"agents", std::move(agents)}};
}

}  // namespace capsweep::loadgen

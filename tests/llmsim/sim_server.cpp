#include "llmsim/sim_server.hpp"

#include <fmt/format.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/random.hpp"
#include "core/stats.hpp"
#include "core/trace_context.hpp"
#include "http/server.hpp"
#include "llmsim/answers.hpp"
#include "llmsim/openai.hpp"
#include "llmsim/pooling.hpp"
#include "observe/text_writer.hpp"

namespace capsweep::llmsim {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

const std::vector<double> kLatencyBuckets{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                      0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};

constexpr std::string_view kStreamHeader =
    "HTTP/1.1 200 OK\r\n"
    "Server: capsweep-llmsim\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\n"
    "Cache-Control: no-cache\r\n"
    "Transfer-Encoding: chunked\r\n"
    "\r\n";

}  // namespace

struct SimServer::Impl : std::enable_shared_from_this<Impl> {
  struct Stream;

  Impl(asio::io_context& io_context, SimConfig c)
      : io(io_context),
        cfg(std::move(c)),
        server(
            io.get_executor(), [this](http::Request& req, beast::tcp_stream& s) { return handle(req, s); },
            http::ServerOptions{.body_limit = 1 << 20,
                                .read_timeout = std::chrono::milliseconds(30'000),
                                .idle_timeout = std::chrono::milliseconds(120'000),
                                .server_name = "capsweep-llmsim"}),
        shutdown_timer(io),
        rng(cfg.seed ^ 0x5eedull),
        ttft(kLatencyBuckets),
        e2e(kLatencyBuckets),
        itl(kItlBuckets),
        lateness_hist({0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1}) {
    labels = observe::label("model_name", cfg.model);
    lanes.push_back(std::make_unique<Lane>(io, cfg.model, cfg.engine));
    for (const AdapterConfig& a : cfg.adapters)
      lanes.push_back(std::make_unique<Lane>(io, a.name, a.params(cfg.engine)));
    for (const auto& l : lanes) served_names.push_back(l->model);
  }

  // One served model (the base, or an adapter) and its engine, with its own iteration clock.
  struct Lane {
    Lane(asio::io_context& io, std::string name, EngineParams params)
        : model(std::move(name)), engine(params), wake(io), iteration_timer(io) {}
    std::string model;
    Engine engine;
    asio::steady_timer wake;             // wakes the idle engine loop on a submission
    asio::steady_timer iteration_timer;  // the iteration clock
    std::vector<Emission> emissions;
  };
  std::vector<std::unique_ptr<Lane>> lanes;  // the base model's first
  std::vector<std::string> served_names;     // theirs, in that order

  Lane* lane_of(std::string_view model) const {
    for (const auto& l : lanes) {
      if (l->model == model) return l.get();
    }
    return nullptr;
  }
  bool all_idle() const {
    return std::all_of(lanes.begin(), lanes.end(), [](const auto& l) { return l->engine.idle(); });
  }

  asio::io_context& io;
  SimConfig cfg;
  http::Server server;
  asio::steady_timer shutdown_timer;
  Rng rng;  // fault decisions
  bool loading = false;
  bool stopping = false;
  std::uint64_t next_request = 1;
  std::size_t active_streams = 0;
  Clock::time_point drain_deadline{};

  // Metrics.
  std::string labels;
  observe::Histogram ttft, e2e, itl, lateness_hist;
  SampleSet lateness_ms;
  std::uint64_t prompt_tokens_total = 0, generation_tokens_total = 0;
  std::uint64_t success_total = 0, errors_total = 0, aborted_total = 0;

  // The completion requests' trace context as received, oldest first (the server's own
  // traces, as vLLM exports them): GET /sim/spans. At most kMaxSpans, later ones counted.
  static constexpr std::size_t kMaxSpans = 200'000;
  struct Span {
    std::string traceparent, request_id;
    std::size_t body_bytes = 0;  // the request body's size
  };
  std::vector<Span> spans;
  std::uint64_t spans_dropped = 0;

  // Responses kept for later turns (store): the conversation's tokens (prompt and answer) and
  // its prompt's blocks. At most kMaxKept, the oldest forgotten first.
  static constexpr std::size_t kMaxKept = 100'000;
  struct Kept {
    std::uint32_t tokens = 0;
    std::vector<std::uint64_t> blocks;
  };
  std::unordered_map<std::string, Kept> kept;
  std::deque<std::string> kept_order;

  // One request in the engine; owned by its connection's coroutine (and in-flight writes).
  struct Stream : std::enable_shared_from_this<Stream> {
    Stream(Impl& s, beast::tcp_stream& c, CompletionRequest r, std::string id_text)
        : sim(s),
          conn(c),
          req(std::move(r)),
          response_id(std::move(id_text)),
          formatter(req, response_id, created_now()),
          done_timer(s.io),
          stall_timer(s.io) {
      done_timer.expires_at(Clock::time_point::max());
    }
    static std::int64_t created_now() {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    }

    Impl& sim;
    beast::tcp_stream& conn;
    CompletionRequest req;
    Engine* engine = nullptr;  // its model's
    std::string response_id;
    std::vector<std::uint64_t> kept_blocks;  // the prompt's blocks, kept with the answer (store)
    ChunkFormatter formatter;
    SeqId id = 0;
    Clock::time_point arrival = Clock::now(), last_token{};
    asio::steady_timer done_timer;
    asio::steady_timer stall_timer;
    // `pending` starts with kChunkSlot bytes reserved for the HTTP chunk-size line.
    static constexpr std::size_t kChunkSlot = 10;
    std::string pending = std::string(kChunkSlot, ' '), writing;
    std::uint32_t pending_events = 0;
    std::uint32_t emitted = 0;    // tokens produced by the engine so far
    std::uint32_t formatted = 0;  // tokens already put into chunks
    std::uint32_t disconnect_at = UINT32_MAX;
    std::uint32_t stall_at = UINT32_MAX;
    Clock::time_point stall_until{};
    bool write_in_flight = false;
    bool finished = false;  // the engine produced the last token
    bool terminal_written = false;
    bool failed = false;
    bool done = false;
    bool drop_after_write = false;
    std::array<char, 16> chunk_header{};  // hex size of an HTTP chunk
    // A pooling request (embeddings, rerank): its sequences in the engine, and how many have
    // not run yet; the answer is whole once none is left.
    std::vector<SeqId> parts;
    std::size_t parts_left = 0;

    // One of a pooling request's sequences ran (prefill only: its one emission).
    void on_part(Clock::time_point now) {
      if (--parts_left > 0) return;
      finished = true;
      emitted = 1;
      ++sim.success_total;
      sim.e2e.observe(seconds(now - arrival));
      finish();
    }

    void on_token(const Emission& e, Clock::time_point now) {
      if (!parts.empty()) return on_part(now);
      emitted = e.index + 1;
      ++sim.generation_tokens_total;
      if (e.index == 0)
        sim.ttft.observe(seconds(now - arrival));
      else
        sim.itl.observe(seconds(now - last_token));
      last_token = now;
      if (e.finished) {
        finished = true;
        ++sim.success_total;
        sim.e2e.observe(seconds(now - arrival));
        // Kept before its last bytes go out: a turn that continues it can come at once.
        sim.keep_response(response_id, req, std::move(kept_blocks), emitted);
      }
      if (!req.stream) {
        if (finished) finish();
        return;
      }
      const std::uint32_t unformatted = emitted - formatted;
      // A chunk never holds both reasoning and content: the last reasoning token ends one.
      const bool reasoning_ends = req.reasoning_tokens > 0 && emitted == req.reasoning_tokens;
      if (e.index == 0 || unformatted >= sim.cfg.tokens_per_chunk || finished || e.index >= disconnect_at ||
          reasoning_ends) {
        formatter.append_tokens(pending, formatted, unformatted, emitted, finished);
        formatted = emitted;
        ++pending_events;
        if (finished) formatter.append_end(pending, emitted);
      }
      if (e.index == stall_at) {
        stall_until = now + std::chrono::microseconds(static_cast<long>(sim.cfg.stall_ms * 1000));
        stall_timer.expires_at(stall_until);
        stall_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
          if (!ec) self->maybe_write();
        });
      }
      if (e.index >= disconnect_at && !finished) {
        drop_after_write = true;
        engine->cancel(id);  // the server drops the stream: no more tokens
      }
      maybe_write();
    }

    // Writes what is due when no write is in flight: first synchronously on the non-blocking
    // socket (no handler, no allocation when the kernel takes it all, as it nearly always
    // does), and only the remainder of a partial write asynchronously.
    void maybe_write() {
      while (!write_in_flight && !failed && !done && pending.size() > kChunkSlot) {
        if (pending_events < sim.cfg.events_per_write && !finished && !drop_after_write) return;
        if (stall_at != UINT32_MAX && Clock::now() < stall_until) return;  // the timer calls again
        const bool last = finished && !drop_after_write;
        // One HTTP chunk: its size line goes into the slot reserved before the events, CRLF
        // after them (and the terminating chunk when last). No copy of the events.
        const std::size_t size = pending.size() - kChunkSlot;
        char digits[16];
        auto [end, ec] = std::to_chars(digits, digits + sizeof digits, size, 16);
        const std::size_t digit_count = static_cast<std::size_t>(end - digits);
        const std::size_t start = kChunkSlot - digit_count - 2;
        std::memcpy(pending.data() + start, digits, digit_count);
        std::memcpy(pending.data() + kChunkSlot - 2, "\r\n", 2);
        pending.append(last ? "\r\n0\r\n\r\n" : "\r\n");
        std::swap(pending, writing);
        pending.assign(kChunkSlot, ' ');
        pending_events = 0;
        terminal_written = last;
        beast::error_code wec;
        const std::size_t n =
            start + conn.socket().write_some(asio::buffer(writing.data() + start, writing.size() - start), wec);
        if (wec && wec != asio::error::would_block) {
          fail_stream();
          return;
        }
        if (n < writing.size()) {
          write_in_flight = true;
          asio::async_write(conn.socket(), asio::buffer(writing.data() + n, writing.size() - n),
                            [self = shared_from_this()](beast::error_code aec, std::size_t) {
                              self->write_in_flight = false;
                              if (aec) return self->fail_stream();
                              if (self->after_write()) self->maybe_write();
                            });
          return;
        }
        if (!after_write()) return;
      }
    }

    // Handles a completed write; false when the stream has ended.
    bool after_write() {
      if (drop_after_write && pending.size() == kChunkSlot) {  // the injected disconnect
        beast::error_code ignored;
        conn.socket().close(ignored);
        fail_stream();
        return false;
      }
      if (terminal_written && pending.size() == kChunkSlot) {
        finish();
        return false;
      }
      return true;
    }

    void fail_stream() {
      if (!finished) {
        engine->cancel(id);
        for (const SeqId part : parts) engine->cancel(part);
        ++sim.aborted_total;
      }
      failed = true;
      finish();
    }

    void finish() {
      if (done) return;
      done = true;
      stall_timer.cancel();
      done_timer.cancel();
    }
  };

  // --- the iteration clock --------------------------------------------------------------

  asio::awaitable<void> engine_loop(Lane& lane) {
    auto self = shared_from_this();
    Engine& engine = lane.engine;
    std::vector<Emission>& emissions = lane.emissions;
    asio::steady_timer& iteration_timer = lane.iteration_timer;
    Clock::time_point next_start = Clock::now();
    for (;;) {
      if (engine.idle()) {
        lane.wake.expires_at(Clock::time_point::max());
        co_await lane.wake.async_wait(use_tuple);
        if (stopping && engine.idle() && active_streams == 0) co_return;
        next_start = Clock::now();
        continue;
      }
      const Engine::Plan plan = engine.begin_iteration();
      const Clock::time_point now = Clock::now();
      // Deadlines are absolute: time lost to a late wake-up or to slow delivery is caught up
      // by the following iterations, so the model's rate holds on average and lateness is
      // reported, not hidden. Only a loop more than a second behind re-anchors at now.
      if (now - next_start > std::chrono::seconds(1)) next_start = now;
      const Clock::time_point deadline = next_start + plan.duration;
      iteration_timer.expires_at(deadline);
      co_await iteration_timer.async_wait(use_tuple);
      const Clock::time_point woke = Clock::now();
      const double late_ms = std::chrono::duration<double, std::milli>(woke - deadline).count();
      lateness_ms.add(late_ms);
      lateness_hist.observe(late_ms / 1000);
      emissions.clear();
      engine.end_iteration(emissions);
      for (const Emission& e : emissions) reinterpret_cast<Stream*>(e.user)->on_token(e, woke);
      next_start = deadline;
    }
  }

  // --- HTTP -------------------------------------------------------------------------------

  http::Reply error_reply(http::Request& req, const ApiError& e, bool count = true) {
    if (count) ++errors_total;
    return {http::json_response(req, static_cast<bhttp::status>(e.status), error_body(e)), true};
  }

  asio::awaitable<http::Reply> handle(http::Request& req, beast::tcp_stream& conn) {
    std::string_view target = req.target();
    target = target.substr(0, target.find('?'));
    const auto method = req.method();
    auto only = [&](bhttp::verb v) -> std::optional<http::Reply> {
      if (method == v) return std::nullopt;
      ApiError e{405, fmt::format("method {} not allowed on {}", std::string(req.method_string()), target),
                 "MethodNotAllowed", ""};
      auto r = error_reply(req, e, false);
      r.response->set(bhttp::field::allow, std::string(bhttp::to_string(v)));
      return r;
    };
    if (target == "/health") {
      if (auto r = only(bhttp::verb::get)) co_return *r;
      const bool ok = !loading || cfg.ready_lies;
      http::Response res{ok ? bhttp::status::ok : bhttp::status::service_unavailable, req.version()};
      co_return http::Reply{std::move(res), true};
    }
    if (target == "/metrics") {
      if (auto r = only(bhttp::verb::get)) co_return *r;
      http::Response res{bhttp::status::ok, req.version()};
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = render_metrics();
      co_return http::Reply{std::move(res), true};
    }
    if (target == "/sim/spans") {
      if (auto r = only(bhttp::verb::get)) co_return *r;
      co_return http::Reply{http::json_response(req, bhttp::status::ok, render_spans()), true};
    }
    const auto pooling = pooling_kind(target);
    const bool known = target == "/v1/models" || target == "/tokenize" || target == "/v1/completions" ||
                       target == "/v1/chat/completions" || target == "/v1/responses" || pooling;
    if (!known) {
      co_return error_reply(req, {404, fmt::format("no route for {}", target), "NotFoundError", ""}, false);
    }
    if (loading && cfg.cold_start_mode == ColdStartMode::hold) {
      // Taken and held: the request waits for the model, as on a replica that said it was ready.
      asio::steady_timer hold(io);
      while (loading && !stopping) {
        hold.expires_after(std::chrono::milliseconds(10));
        co_await hold.async_wait(use_tuple);
      }
    }
    if (loading) {
      co_return error_reply(req, {503, "the model is still loading", "ServiceUnavailableError", ""});
    }
    if (target == "/v1/models") {
      if (auto r = only(bhttp::verb::get)) co_return *r;
      json data = json::array();
      for (const auto& l : lanes) {  // adapters as vLLM lists LoRA adapters: with their parent
        data.push_back({{"id", l->model},
                        {"object", "model"},
                        {"created", Stream::created_now()},
                        {"owned_by", "capsweep-llmsim"},
                        {"parent", l->model == cfg.model ? json(nullptr) : json(cfg.model)},
                        {"max_model_len", cfg.engine.max_model_len}});
      }
      json j{{"object", "list"}, {"data", std::move(data)}};
      co_return http::Reply{http::json_response(req, bhttp::status::ok, j.dump()), true};
    }
    if (auto r = only(bhttp::verb::post)) co_return *r;
    if (target == "/tokenize") co_return tokenize(req);
    if (pooling) co_return co_await pool(req, conn, *pooling);
    const Api api = target == "/v1/chat/completions" ? Api::chat
                    : target == "/v1/responses"      ? Api::responses
                                                     : Api::completions;
    co_return co_await complete(req, conn, api);
  }

  http::Reply tokenize(http::Request& req) {
    json j = json::parse(req.body(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return error_reply(req, {400, "request body is not a JSON object", "BadRequestError", ""});
    }
    std::vector<std::string> texts;
    if (auto p = j.find("prompt"); p != j.end() && p->is_string()) {
      texts.push_back(p->get<std::string>());
    } else if (auto m = j.find("messages"); m != j.end() && m->is_array()) {
      for (const auto& msg : *m) {
        if (msg.is_object() && msg.contains("content") && msg["content"].is_string()) {
          texts.push_back(msg["content"].get<std::string>());
        }
      }
    } else {
      return error_reply(req, {400, "'prompt' (a string) or 'messages' is required", "BadRequestError", "prompt"});
    }
    json tokens = json::array();
    for (const auto& text : texts) {
      std::size_t i = 0;
      while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        std::size_t start = i;
        while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        if (i > start)
          tokens.push_back(std::hash<std::string_view>{}(std::string_view(text).substr(start, i - start)) % 32000);
      }
    }
    json out{{"count", tokens.size()}, {"max_model_len", cfg.engine.max_model_len}, {"tokens", tokens}};
    return {http::json_response(req, bhttp::status::ok, out.dump()), true};
  }

  // A request's traceparent (valid or not: a W3C server ignores a bad one, the test sees it).
  void keep_span(const http::Request& req) {
    if (spans.size() >= kMaxSpans) {
      ++spans_dropped;
      return;
    }
    const auto header = [&req](std::string_view name) {
      const auto it = req.find(name);
      return it == req.end() ? std::string() : std::string(it->value());
    };
    spans.push_back({header("traceparent"), header("x-request-id"), req.body().size()});
  }

  std::string render_spans() const {
    json list = json::array();
    for (const Span& s : spans) {
      list.push_back({{"traceparent", s.traceparent},
                      {"request_id", s.request_id},
                      {"body_bytes", s.body_bytes},
                      {"valid", parse_traceparent(s.traceparent).has_value()}});
    }
    return json{{"spans", std::move(list)}, {"dropped", spans_dropped}}.dump();
  }

  // A response that continues a kept one (previous_response_id): the kept conversation is its
  // prompt's start, its tokens counted and its blocks the prompt's cacheable prefix (the new
  // turn's own blocks are not chained to it, so they are not offered to the cache).
  bool continue_kept(CompletionRequest& r, ApiError& error) const {
    if (r.previous_response_id.empty()) return true;
    const auto it = kept.find(r.previous_response_id);
    if (it == kept.end()) {
      error = {400, fmt::format("Previous response with id '{}' not found.", r.previous_response_id),
               "invalid_request_error", "previous_response_id"};
      return false;
    }
    r.prompt_tokens += it->second.tokens;
    r.blocks = it->second.blocks;
    return true;
  }

  // A finished response the request asked to keep (store), for the turns that continue it.
  void keep_response(const std::string& id, const CompletionRequest& r, std::vector<std::uint64_t> blocks,
                     std::uint32_t emitted) {
    if (r.api != Api::responses || !r.store) return;
    if (kept_order.size() >= kMaxKept) {
      kept.erase(kept_order.front());
      kept_order.pop_front();
    }
    kept[id] = {r.prompt_tokens + emitted, std::move(blocks)};
    kept_order.push_back(id);
  }

  // A response's id's prefix, by API.
  static constexpr std::array<const char*, 3> kIdPrefix{"cmpl", "chatcmpl", "resp"};

  asio::awaitable<http::Reply> complete(http::Request& req, beast::tcp_stream& conn, Api api) {
    keep_span(req);
    ApiError error;
    auto parsed = parse_completion_request(req.body(), api, served(), cfg.seed, error);
    if (!parsed || !continue_kept(*parsed, error)) co_return error_reply(req, error);
    script_answer(*parsed, cfg, rng);
    if (api != Api::completions && parsed->script.pieces.empty()) parsed->reasoning_tokens = cfg.reasoning_tokens;
    if (cfg.error_rate > 0 && rng.uniform01() < cfg.error_rate) {
      co_return error_reply(req, {500, "injected server error", "InternalServerError", ""});
    }
    const std::string response_id = fmt::format("{}-{}", kIdPrefix[static_cast<int>(api)], next_request++);
    auto stream = std::make_shared<Stream>(*this, conn, std::move(*parsed), response_id);
    if (api == Api::responses && stream->req.store) stream->kept_blocks = stream->req.blocks;
    // A structured answer ends with its last piece (or at max_tokens); the overrun fault runs past.
    const auto& script = stream->req.script.pieces;
    const std::uint32_t tokens =
        (script.empty() ? stream->req.max_tokens
                        : std::min<std::uint32_t>(stream->req.max_tokens, static_cast<std::uint32_t>(script.size()))) +
        stream->req.reported_tokens_extra;
    Lane& lane = *lane_of(stream->req.model);
    stream->engine = &lane.engine;
    auto id = lane.engine.submit({stream->req.prompt_tokens, tokens, reinterpret_cast<std::uintptr_t>(stream.get()),
                                  std::move(stream->req.blocks)});
    if (!id) {
      co_return error_reply(req, {400, id.error().message, "BadRequestError", "max_tokens"});
    }
    stream->id = *id;
    prompt_tokens_total += stream->req.prompt_tokens;
    if (cfg.disconnect_rate > 0 && rng.uniform01() < cfg.disconnect_rate) {
      stream->disconnect_at = static_cast<std::uint32_t>(rng.uniform_int(0, stream->req.max_tokens / 2));
    }
    if (cfg.stall_rate > 0 && cfg.stall_ms > 0 && rng.uniform01() < cfg.stall_rate) {
      stream->stall_at = static_cast<std::uint32_t>(rng.uniform_int(0, stream->req.max_tokens - 1));
    }
    ++active_streams;
    lane.wake.cancel();
    beast::error_code nb_ec;
    conn.socket().non_blocking(true, nb_ec);  // streamed writes try the socket directly

    if (stream->req.stream) {
      // Headers (and the chat role chunk) go out at once, as vLLM sends them.
      std::string head(kStreamHeader);
      if (api != Api::completions) {
        std::string role;
        stream->formatter.append_role(role);
        head += fmt::format("{:x}\r\n{}\r\n", role.size(), role);
      }
      auto [ec, nw] = co_await asio::async_write(conn.socket(), asio::buffer(head), use_tuple);
      if (ec) stream->fail_stream();
    }
    if (!stream->done) co_await stream->done_timer.async_wait(use_tuple);
    // Wait for a write still in flight (it references the stream's buffers and socket).
    while (stream->write_in_flight) {
      asio::steady_timer t(io, std::chrono::milliseconds(1));
      co_await t.async_wait(use_tuple);
    }
    --active_streams;
    if (stopping) check_drained();
    if (stream->req.stream) co_return http::Reply{std::nullopt, !stream->failed};
    if (stream->failed) co_return http::Reply{std::nullopt, false};
    auto res = http::json_response(req, bhttp::status::ok, stream->formatter.full_response(stream->emitted));
    co_return http::Reply{std::move(res), true};
  }

  static std::optional<PoolKind> pooling_kind(std::string_view target) {
    if (target == "/v1/embeddings") return PoolKind::embeddings;
    if (target == "/rerank" || target == "/v1/rerank") return PoolKind::rerank;
    return std::nullopt;
  }

  // An embeddings or rerank request: its sequences queued in the engine, answered whole once
  // each has run.
  asio::awaitable<http::Reply> pool(http::Request& req, beast::tcp_stream& conn, PoolKind kind) {
    keep_span(req);
    ApiError error;
    auto parsed = parse_pooling_request(req.body(), kind, served(), error);
    if (!parsed) co_return error_reply(req, error);
    if (cfg.error_rate > 0 && rng.uniform01() < cfg.error_rate) {
      co_return error_reply(req, {500, "injected server error", "InternalServerError", ""});
    }
    CompletionRequest as_run;
    as_run.model = parsed->model;
    as_run.prompt_tokens = parsed->prompt_tokens;
    as_run.max_tokens = 1;
    const std::string id = fmt::format("{}-{}", kind == PoolKind::embeddings ? "embd" : "rerank", next_request++);
    auto stream = std::make_shared<Stream>(*this, conn, std::move(as_run), id);
    Lane& lane = *lane_of(parsed->model);
    stream->engine = &lane.engine;
    for (const std::uint32_t tokens : parsed->sequences) {
      auto seq = lane.engine.submit({tokens, 1, reinterpret_cast<std::uintptr_t>(stream.get()), {}});
      if (!seq) {
        for (const SeqId part : stream->parts) lane.engine.cancel(part);
        co_return error_reply(
            req, {400, seq.error().message, "BadRequestError", kind == PoolKind::embeddings ? "input" : "documents"});
      }
      stream->parts.push_back(*seq);
    }
    stream->parts_left = stream->parts.size();
    prompt_tokens_total += parsed->prompt_tokens;
    ++active_streams;
    lane.wake.cancel();
    co_await stream->done_timer.async_wait(use_tuple);
    --active_streams;
    if (stopping) check_drained();
    co_return http::Reply{http::json_response(req, bhttp::status::ok, pooling_response(*parsed, id)), true};
  }

  // The served models' names: the base model's first.
  const std::vector<std::string>& served() const { return served_names; }

  // A figure summed over every served model's engine.
  template <class F>
  double over_lanes(F&& f) const {
    double sum = 0;
    for (const auto& l : lanes) sum += static_cast<double>(f(l->engine));
    return sum;
  }

  std::string render_metrics() {
    std::string out;
    out.reserve(8192);
    const double kv_usage = over_lanes([](const Engine& e) { return e.kv_reserved(); }) /
                            over_lanes([](const Engine& e) { return e.params().kv_cache_tokens; });
    observe::render_sample(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                           labels, over_lanes([](const Engine& e) { return e.running(); }));
    observe::render_sample(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                           labels, over_lanes([](const Engine& e) { return e.waiting(); }));
    observe::render_sample(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                           labels, kv_usage);
    observe::render_sample(out, "vllm:gpu_cache_usage_perc", "gauge",
                           "GPU KV-cache usage (older name). 1 means 100 percent usage.", labels, kv_usage);
    observe::render_sample(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", labels,
                           double(prompt_tokens_total));
    observe::render_sample(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
                           labels, double(generation_tokens_total));
    if (cfg.engine.prefix_cache_blocks > 0) {
      observe::render_sample(out, "vllm:prefix_cache_queries_total", "counter",
                             "Prefix cache queries, in terms of number of queried tokens.", labels,
                             over_lanes([](const Engine& e) { return e.prefix_queries(); }));
      observe::render_sample(out, "vllm:prefix_cache_hits_total", "counter",
                             "Prefix cache hits, in terms of number of cached tokens.", labels,
                             over_lanes([](const Engine& e) { return e.prefix_hits(); }));
    }
    observe::render_sample(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.",
                           labels + ",finished_reason=\"length\"", double(success_total));
    observe::render_sample(out, "llmsim:request_errors_total", "counter", "Requests answered with an error (4xx/5xx).",
                           labels, double(errors_total));
    observe::render_sample(out, "llmsim:request_aborted_total", "counter", "Streams dropped before their last token.",
                           labels, double(aborted_total));
    ttft.render(out, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels);
    itl.render(out, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels);
    e2e.render(out, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", labels);
    lateness_hist.render(out, "llmsim:iteration_lateness_seconds", "How late iterations woke after their deadline.",
                         labels);
    return out;
  }

  // --- lifecycle --------------------------------------------------------------------------

  void start() {
    auto ep = http::parse_listen_address(cfg.listen).value();
    server.bind(ep);
    for (const auto& l : lanes) asio::co_spawn(io, engine_loop(*l), asio::detached);
    const bool delay_listen = cfg.load_time_s > 0 && cfg.cold_start_mode == ColdStartMode::refuse && !cfg.ready_lies;
    if (cfg.load_time_s > 0) {
      loading = true;
      if (!delay_listen) server.start();
      auto t =
          std::make_shared<asio::steady_timer>(io, std::chrono::microseconds(static_cast<long>(cfg.load_time_s * 1e6)));
      t->async_wait([self = shared_from_this(), t, delay_listen](beast::error_code ec) {
        if (ec || self->stopping) return;
        self->loading = false;
        if (delay_listen) self->server.start();
      });
    } else {
      server.start();
    }
  }

  void begin_shutdown() {
    if (stopping) return;
    stopping = true;
    server.shutdown();
    drain_deadline = Clock::now() + std::chrono::microseconds(static_cast<long>(cfg.drain_s * 1e6));
    shutdown_timer.expires_at(drain_deadline);
    shutdown_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->io.stop();
    });
    check_drained();
  }

  void check_drained() {
    if (active_streams == 0 && all_idle()) {
      // Let the last responses flush, then stop.
      auto t = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
      t->async_wait([self = shared_from_this(), t](beast::error_code) {
        if (self->active_streams == 0) self->io.stop();
      });
    }
  }
};

SimServer::SimServer(asio::io_context& io, SimConfig cfg) : impl_(std::make_shared<Impl>(io, std::move(cfg))) {}
SimServer::~SimServer() = default;

void SimServer::start() {
  impl_->start();
}
asio::ip::tcp::endpoint SimServer::endpoint() const {
  return impl_->server.local_endpoint();
}
void SimServer::begin_shutdown() {
  impl_->begin_shutdown();
}

LatenessReport SimServer::lateness() const {
  const auto& s = impl_->lateness_ms;
  return {s.count(), s.percentile(50), s.percentile(99), s.max()};
}

}  // namespace capsweep::llmsim

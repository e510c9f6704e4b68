#include "llm/client.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdint>
#include <list>
#include <stdexcept>
#include <unordered_set>

#include "core/text.hpp"
#include "llm/http_body.hpp"
#include "llm/openai_stream.hpp"
#include "llm/sse.hpp"

namespace capsweep::llm {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

// One connection: plain TCP or TLS over TCP.
struct Connection {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  // Bytes read from the socket, not yet parsed; bounded so that thousands of idle streams stay
  // cheap (Beast would otherwise grow it to 64 KiB per connection).
  beast::flat_buffer buffer{8192};

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
};

Outcome status_outcome(unsigned status) {
  return status >= 500 ? Outcome::http_5xx : Outcome::http_4xx;
}

bool is_timeout(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

}  // namespace

// What one streamed answer has said so far: its content chunks with their token counts, the
// end marker, a failure (an error event, a malformed one), and the server's usage figures.
struct StreamTally {
  StreamChunk (*read)(std::string_view data) = interpret_chunk;  // the target API's reader
  std::uint64_t last_completion_tokens = 0;
  std::uint64_t tokens_seen = 0;  // content tokens so far
  UsageCounts usage;
  bool saw_done = false, saw_finish = false, failed = false;
  std::string error_message;  // what the server said of a failure

  // One SSE data payload that arrived at `now`.
  void on_event(std::string_view data, Nanos now, RequestRecord& rec) {
    if (failed || saw_done) return;
    if (rec.events) rec.events->emplace_back(data);
    const StreamChunk sc = read(data);
    switch (sc.kind) {
      case StreamChunk::Kind::content: {
        std::uint32_t tokens = 1;
        if (sc.completion_tokens) {
          tokens = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
              *sc.completion_tokens > last_completion_tokens ? *sc.completion_tokens - last_completion_tokens : 1, 1,
              UINT32_MAX));
          last_completion_tokens = *sc.completion_tokens;
        }
        rec.chunks.push_back({now, tokens, sc.reasoning});
        tokens_seen += tokens;
        break;
      }
      case StreamChunk::Kind::done:
        saw_done = true;
        break;
      case StreamChunk::Kind::error:
        error_message = printable_ascii(sc.error_message);
        failed = true;
        break;
      case StreamChunk::Kind::malformed:
        error_message = "a malformed event: " + printable_ascii(data, 120);
        failed = true;
        break;
      default:
        break;
    }
    saw_finish = saw_finish || sc.finished;
    if (sc.completion_tokens) usage.completion = sc.completion_tokens;
    if (sc.prompt_tokens) usage.prompt = sc.prompt_tokens;
    if (sc.reasoning_tokens) usage.reasoning = sc.reasoning_tokens;
    if (sc.total_tokens) usage.total = sc.total_tokens;
  }

  // An "error:" line (llama.cpp's server): the stream failed, with the server's message.
  void on_error_field(std::string_view value) {
    if (failed) return;
    failed = true;
    const StreamChunk sc = read(value);
    error_message = printable_ascii(sc.kind == StreamChunk::Kind::error ? sc.error_message : value);
  }

  // The record's outcome and token counts once a 2xx answer's body has ended: the server's
  // usage when it sent one, else the chunks counted (and marked as estimated).
  void settle(RequestRecord& rec) const {
    if (failed) {
      rec.outcome = Outcome::stream_error;
      rec.error_message = printable_ascii(error_message);
      return;
    }
    // A count past 2^32 - 1 (a server that lies) is kept as the largest, not wrapped.
    if (usage.prompt) rec.input_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(*usage.prompt, UINT32_MAX));
    const std::uint64_t reasoning_usage = usage.reasoning.value_or(0);
    if (const auto generated = generated_tokens(usage)) {
      rec.output_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(*generated, UINT32_MAX));
      rec.output_tokens_estimated = false;
    } else {
      std::uint64_t counted = 0;
      for (const auto& ch : rec.chunks) counted += ch.tokens;
      rec.output_tokens = static_cast<std::uint32_t>(counted);
      rec.output_tokens_estimated = true;
    }
    if (usage.reasoning) {
      rec.reasoning_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(reasoning_usage, rec.output_tokens));
    } else {
      std::uint64_t counted = 0;
      for (const auto& ch : rec.chunks) counted += ch.reasoning ? ch.tokens : 0;
      rec.reasoning_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(counted, rec.output_tokens));
    }
    if (!saw_done && !saw_finish) {
      // The body ended (the connection closed, or a length ran out) before the answer did.
      rec.outcome = Outcome::truncated;
      rec.error_message = "the stream ended without a finish reason or [DONE]";
      return;
    }
    rec.outcome = rec.chunks.empty() ? Outcome::empty_stream : Outcome::ok;
  }
};

// What an error answer's body says: an OpenAI-style {"error": {"message"}} / {"message"} /
// {"detail"}, else its first bytes.
std::string error_body_message(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    const nlohmann::json* e = &j;
    if (auto it = j.find("error"); it != j.end()) {
      if (it->is_string()) return it->get<std::string>().substr(0, 200);
      if (it->is_object()) e = &*it;
    }
    for (const char* key : {"message", "detail"}) {
      if (auto m = e->find(key); m != e->end() && m->is_string()) return m->get<std::string>().substr(0, 200);
    }
  }
  return std::string(body.substr(0, 200));
}

// "HTTP status: message" in printable ASCII, at most 200 bytes: safe to store, to show and to
// send as an agent's record.
std::string error_answer_message(unsigned status, std::string_view body) {
  return printable_ascii(fmt::format("HTTP {}: {}", status, error_body_message(body.substr(0, 4096))));
}

// A streamed answer's body as the client reads it: its framing, its events and what they
// said, or (not a 2xx) the first bytes of the error it carries.
struct BodyRead {
  BodyRead(BodyDecoder f, std::size_t max_event_bytes, unsigned s) : framing(f), sse(max_event_bytes), status(s) {}
  BodyDecoder framing;
  SseParser sse;
  unsigned status = 0;
  StreamTally tally;
  std::string error_body;
  std::uint64_t bytes = 0;  // decoded so far: a hostile target may stream without end
  bool stray = false;       // bytes came after the answer's end
  bool ok() const noexcept { return status >= 200 && status < 300; }
};

// The time limits of a body being read (the read timeout between reads, the request's
// deadline, a user's patience for a first token), kept lazily: each read only moves `due`;
// the timer wakes at the old due, finds the new one and sleeps again, and only a due that has
// passed cancels the read. A timer re-armed at every read would cost more than the read.
struct Watchdog : std::enable_shared_from_this<Watchdog> {
  Watchdog(const asio::any_io_executor& ex, beast::tcp_stream& s) : timer(ex), stream(&s) {}
  asio::steady_timer timer;
  beast::tcp_stream* stream;
  SteadyClock::time_point due;
  bool fired = false, stopped = false;

  void start(SteadyClock::time_point when) {
    due = when;
    timer.expires_at(due);
    timer.async_wait([self = shared_from_this()](const beast::error_code& ec) { self->woke(ec); });
  }
  void woke(const beast::error_code& ec) {
    if (ec || stopped) return;
    if (SteadyClock::now() < due) return start(due);
    fired = true;
    beast::error_code ignored;
    stream->socket().cancel(ignored);
  }
  void restart() {
    fired = false;
    start(due);
  }
  void stop() {
    stopped = true;
    timer.cancel();
  }
};

std::string_view as_view(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.data().data()), b.data().size()};
}

struct Client::Impl : std::enable_shared_from_this<Impl> {
  // The outcome of a request whose I/O failed with `ec` before an answer was complete.
  Outcome io_failure(const beast::error_code& ec, Outcome otherwise = Outcome::connect) const {
    if (cancelled) return Outcome::cancelled;
    return is_timeout(ec) ? Outcome::timeout : otherwise;
  }

  Impl(asio::any_io_executor ex, Target t) : executor(ex), target(std::move(t)), tls_context(ssl::context::tls_client) {
    if (target.tls()) {
      tls_context.set_verify_mode(target.verify_tls ? ssl::verify_peer : ssl::verify_none);
      tls_context.set_default_verify_paths();
      if (!target.ca_file.empty()) {
        beast::error_code ec;
        tls_context.load_verify_file(target.ca_file, ec);
        if (ec) throw std::runtime_error("cannot load CA file " + target.ca_file + ": " + ec.message());
      }
    }
  }

  asio::any_io_executor executor;
  Target target;
  ssl::context tls_context;
  std::vector<asio::ip::tcp::endpoint> endpoints;  // resolved once
  std::vector<std::unique_ptr<Connection>> idle;
  std::unordered_set<Connection*> busy;
  bool cancelled = false;

  // Returns a connected (and TLS-handshaken) connection, from the pool when one is idle.
  // On failure returns nullptr and the outcome to record.
  asio::awaitable<std::unique_ptr<Connection>> acquire(Outcome& failure) {
    if (!idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      co_return c;
    }
    if (endpoints.empty() && !co_await resolve(failure)) co_return nullptr;
    auto c = std::make_unique<Connection>();
    if (target.tls()) {
      c->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(executor, tls_context);
    } else {
      c->plain = std::make_unique<beast::tcp_stream>(executor);
    }
    busy.insert(c.get());
    struct Unmark {
      Impl* self;
      Connection* c;
      ~Unmark() { self->busy.erase(c); }
    } unmark{this, c.get()};
    beast::tcp_stream& tcp = c->lowest();
    tcp.expires_after(target.connect_timeout);
    auto [ec, ep] = co_await tcp.async_connect(endpoints, use_tuple);
    if (ec) {
      failure = io_failure(ec);
      co_return nullptr;
    }
    tcp.socket().set_option(asio::ip::tcp::no_delay(true), ec);
    if (c->tls && !co_await handshake(*c, failure)) co_return nullptr;
    co_return c;
  }

  // Resolves the target's host once (an IP literal needs no resolver; when several requests
  // resolve at once as a step starts, the first answer is kept, never appended to) and keeps
  // only the addresses the service's allow-list admits, so a name cannot be pointed (or
  // rebound) past it. False, with the outcome to record, when none is left.
  asio::awaitable<bool> resolve(Outcome& failure) {
    beast::error_code aec;
    const auto address = asio::ip::make_address(target.host, aec);
    if (!aec) {
      endpoints.assign(1, asio::ip::tcp::endpoint(address, target.port));
    } else {
      asio::ip::tcp::resolver resolver(executor);
      auto [ec, results] = co_await resolver.async_resolve(target.host, std::to_string(target.port), use_tuple);
      if (ec) {
        failure = Outcome::connect;
        co_return false;
      }
      if (endpoints.empty()) {
        for (const auto& r : results) endpoints.push_back(r.endpoint());
      }
    }
    if (target.allow_address) {
      std::erase_if(endpoints,
                    [&](const asio::ip::tcp::endpoint& e) { return !target.allow_address(e.address().to_string()); });
      if (endpoints.empty()) {
        failure = Outcome::connect;
        co_return false;
      }
    }
    co_return true;
  }

  // TLS on a connected stream: SNI, host name verification, the handshake.
  asio::awaitable<bool> handshake(Connection& c, Outcome& failure) {
    if (!SSL_set_tlsext_host_name(c.tls->native_handle(), target.host.c_str())) {
      failure = Outcome::tls;
      co_return false;
    }
    if (target.verify_tls) c.tls->set_verify_callback(ssl::host_name_verification(target.host));
    c.lowest().expires_after(target.connect_timeout);
    auto [hec] = co_await c.tls->async_handshake(ssl::stream_base::client, use_tuple);
    if (hec) {
      failure = io_failure(hec, Outcome::tls);
      co_return false;
    }
    co_return true;
  }

  void release(std::unique_ptr<Connection> c, bool reusable) {
    if (reusable && !cancelled) {
      idle.push_back(std::move(c));
      return;
    }
    beast::error_code ignored;
    c->lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    c->lowest().socket().close(ignored);
  }

  bhttp::request<bhttp::string_body> make_request(bhttp::verb verb, const std::string& path, std::string body,
                                                  const RequestIds& ids, bool sse) {
    bhttp::request<bhttp::string_body> req{verb, path, 11};
    req.set(bhttp::field::host, target.host);
    req.set(bhttp::field::user_agent, "capsweep");
    if (!body.empty()) req.set(bhttp::field::content_type, "application/json");
    if (sse) req.set(bhttp::field::accept, "text/event-stream");
    if (!ids.request_id.empty()) req.set("x-request-id", ids.request_id);
    if (!ids.traceparent.empty()) req.set("traceparent", ids.traceparent);
    for (const auto& [k, v] : target.headers) req.set(k, v);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  // The next operation on `c` may take the read timeout, but never past the request's deadline.
  void arm(Connection& c, SteadyClock::time_point deadline) const {
    c.lowest().expires_at(std::min(SteadyClock::now() + target.read_timeout, deadline));
  }

  // The deadline of the next read: the request's, or sooner while its user waits for a first
  // token and would give up (rec.abandon_at).
  static SteadyClock::time_point read_deadline(const RequestRecord& rec, SteadyClock::time_point origin,
                                               SteadyClock::time_point deadline) {
    if (rec.abandon_at && rec.chunks.empty()) return std::min(deadline, origin + *rec.abandon_at);
    return deadline;
  }

  // Whether a read that failed with `ec` was the user giving up: the wait for a first token
  // outlasted its patience, and nothing else ended it.
  bool gave_up(const beast::error_code& ec, const RequestRecord& rec, SteadyClock::time_point origin) const {
    return !cancelled && is_timeout(ec) && rec.abandon_at && rec.chunks.empty() &&
           SteadyClock::now() >= origin + *rec.abandon_at;
  }

  // Whether the user reads no further: the stream reached the tokens it would read.
  static bool read_enough(const RequestRecord& rec, const StreamTally& tally) {
    return rec.abandon_after_tokens > 0 && tally.tokens_seen >= rec.abandon_after_tokens;
  }

  // Writes the request, stamping rec.sent; false (with rec.outcome set) when it fails.
  template <class Stream>
  asio::awaitable<bool> write_request(Stream& stream, Connection& c, bhttp::request<bhttp::string_body>& req,
                                      RequestRecord& rec, SteadyClock::time_point origin,
                                      SteadyClock::time_point deadline) {
    arm(c, deadline);
    rec.sent = SteadyClock::now() - origin;
    auto [wec, wn] = co_await bhttp::async_write(stream, req, use_tuple);
    if (wec) rec.outcome = io_failure(wec);
    co_return !wec;
  }

  template <class Stream>
  asio::awaitable<void> exchange(Stream& stream, Connection& c, bhttp::request<bhttp::string_body>& req,
                                 RequestRecord& rec, SteadyClock::time_point origin, bool& reusable) {
    const auto deadline = SteadyClock::now() + target.request_timeout;
    if (!co_await write_request(stream, c, req, rec, origin, deadline)) co_return;
    bhttp::response_parser<bhttp::empty_body> parser;  // the head only: the body is read below
    arm(c, read_deadline(rec, origin, deadline));
    auto [hec, hn] = co_await bhttp::async_read_header(stream, c.buffer, parser, use_tuple);
    if (hec) {
      rec.outcome = gave_up(hec, rec, origin) ? Outcome::abandoned : io_failure(hec);
      co_return;
    }
    const unsigned status = parser.get().result_int();
    BodyRead b(framing(parser), target.max_sse_event_bytes, status);
    b.tally.read = api_row(target.api).read_chunk;
    const bool whole = co_await read_body(stream, c, b, rec, origin, deadline);
    if (!whole) co_return;  // rec.outcome says why
    if (!b.ok()) {
      rec.outcome = status_outcome(status);
      rec.error_message = error_answer_message(status, b.error_body);
      reusable = b.framing.done() && !b.stray && parser.keep_alive();
      co_return;
    }
    b.tally.settle(rec);
    reusable = !b.tally.failed && b.framing.done() && !b.stray && parser.keep_alive();
  }

  // An answer's framing by its head: chunked, a Content-Length, none (no body), or until close.
  static BodyDecoder framing(const bhttp::response_parser<bhttp::empty_body>& head) {
    if (head.chunked()) return BodyDecoder::chunked();
    if (head.content_length()) return BodyDecoder::length(*head.content_length());
    if (head.is_done()) return BodyDecoder::length(0);
    return BodyDecoder::until_close();
  }

  // Decodes bytes of the body that arrived at `now`; false once the reading must stop (the
  // body is too long, or the stream failed).
  bool take(BodyRead& b, std::string_view wire, Nanos now, RequestRecord& rec) const {
    const std::size_t used = b.framing.feed(wire, [&](std::string_view data) {
      b.bytes += data.size();
      if (b.bytes > target.max_response_bytes) return;
      if (!b.ok()) {
        if (b.error_body.size() < 4096) b.error_body.append(data.substr(0, 4096 - b.error_body.size()));
      } else if (!b.tally.failed &&
                 !b.sse.feed(data, [&](std::string_view event) { b.tally.on_event(event, now, rec); })) {
        b.tally.failed = true;
        b.tally.error_message = "an event exceeded the size limit";
      } else if (!b.sse.error_field().empty()) {
        b.tally.on_error_field(b.sse.error_field());
      }
    });
    b.stray = b.stray || used < wire.size();  // bytes past the answer's end: the connection is not reused
    return b.bytes <= target.max_response_bytes && !b.tally.failed;
  }

  // Reads the body from the socket itself, each read decoded whole; true when it ended (or
  // the stream failed, in b.tally) and the answer can be settled, false with rec.outcome set
  // when the reading stopped before.
  template <class Stream>
  asio::awaitable<bool> read_body(Stream& stream, Connection& c, BodyRead& b, RequestRecord& rec,
                                  SteadyClock::time_point origin, SteadyClock::time_point deadline) {
    const auto dog = std::make_shared<Watchdog>(executor, c.lowest());
    c.lowest().expires_never();  // the watchdog keeps the time from here
    const auto start = SteadyClock::now();
    bool going = take(b, as_view(c.buffer), start - origin, rec);
    c.buffer.consume(c.buffer.size());
    dog->start(due_after(start, rec, origin, deadline));
    char buf[8192];
    while (going && !b.framing.done() && !b.framing.failed()) {
      if (b.ok() && read_enough(rec, b.tally)) {
        // The user stops reading: the connection is closed, so the server sees it go.
        rec.outcome = Outcome::abandoned;
        break;
      }
      auto [ec, n] = co_await read_some(stream, buf, sizeof buf);
      const auto now = SteadyClock::now();  // the arrival of these bytes
      if (n > 0) going = take(b, std::string_view(buf, n), now - origin, rec);
      dog->due = due_after(now, rec, origin, deadline);  // past the first token, patience no longer counts
      // The timer woke in the same turn as this read came, before it was handled, and found
      // nothing to cancel: it keeps the time again.
      if (dog->fired && !ec) dog->restart();
      if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
        b.framing.end_of_input();
      } else if (ec) {
        if (dog->fired) ec = beast::error::timeout;
        rec.outcome = b.ok() && gave_up(ec, rec, origin)
                          ? Outcome::abandoned
                          : io_failure(ec, b.ok() ? Outcome::stream_error : status_outcome(b.status));
        break;
      }
    }
    dog->stop();
    if (rec.outcome == Outcome::abandoned || (rec.outcome != Outcome::ok && !b.framing.failed())) co_return false;
    if (b.bytes > target.max_response_bytes || b.framing.failed()) {
      // The connection is not reused: the rest of the answer is unread, or its framing broke.
      rec.outcome = b.ok() ? Outcome::stream_error : status_outcome(b.status);
      if (b.framing.failed()) rec.error_message = b.framing.error();
      co_return false;
    }
    co_return true;
  }

  // When the next read must have come, for a read that ended at `now`.
  SteadyClock::time_point due_after(SteadyClock::time_point now, const RequestRecord& rec,
                                    SteadyClock::time_point origin, SteadyClock::time_point deadline) const {
    return std::min(now + target.read_timeout, read_deadline(rec, origin, deadline));
  }

  // One read of the socket under the stream (a TLS stream's decrypted bytes), past Beast's
  // per-operation timer: the watchdog keeps the time.
  template <class Stream>
  static asio::awaitable<std::tuple<beast::error_code, std::size_t>> read_some(Stream& stream, char* buf,
                                                                               std::size_t size) {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      co_return co_await stream.socket().async_read_some(asio::buffer(buf, size), use_tuple);
    } else {
      co_return co_await stream.async_read_some(asio::buffer(buf, size), use_tuple);
    }
  }

  // Non-streaming completion: the answer arrives whole; its arrival is both first and last token.
  template <class Stream>
  asio::awaitable<void> exchange_plain(Stream& stream, Connection& c, bhttp::request<bhttp::string_body>& req,
                                       RequestRecord& rec, SteadyClock::time_point origin, bool& reusable) {
    const auto deadline = SteadyClock::now() + target.request_timeout;
    if (!co_await write_request(stream, c, req, rec, origin, deadline)) co_return;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(target.max_response_bytes);
    arm(c, deadline);
    auto [rec_ec, n] = co_await bhttp::async_read(stream, c.buffer, parser, use_tuple);
    const Nanos now = SteadyClock::now() - origin;
    if (rec_ec) {
      rec.outcome = io_failure(rec_ec);
      co_return;
    }
    const unsigned status = parser.get().result_int();
    reusable = parser.keep_alive();
    if (status < 200 || status >= 300) {
      rec.outcome = status_outcome(status);
      rec.error_message = error_answer_message(status, parser.get().body());
      co_return;
    }
    if (rec.events) rec.events->push_back(parser.get().body());
    settle_whole(parser.get().body(), now, rec);
  }

  // A whole answer's body, read by the API's row, into the record (its one chunk at `now`).
  void settle_whole(std::string_view body, Nanos now, RequestRecord& rec) const {
    const ApiRow& row = api_row(target.api);
    const auto usage = row.read_body(body);
    rec.streamed = false;
    if (!usage) {
      rec.outcome = Outcome::stream_error;
      rec.error_message = "the answer is not a JSON object";
      return;
    }
    if (usage->prompt)
      rec.input_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(*usage->prompt, UINT32_MAX));
    if (!row.generates) return settle_pooled(row, *usage, now, rec);
    std::uint32_t tokens = 1;
    rec.output_tokens_estimated = true;
    if (const auto generated = generated_tokens(*usage)) {
      tokens = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(*generated, 1, UINT32_MAX));
      rec.output_tokens_estimated = false;
    }
    if (usage->reasoning) {
      rec.reasoning_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(*usage->reasoning, tokens));
    }
    rec.chunks.push_back({now, tokens});
    rec.output_tokens = tokens;
    rec.outcome = Outcome::ok;
  }

  // An answer of no generated tokens (embeddings, rerank): one result per item it was sent
  // (a row that is not exact: at least one, at most that many).
  static void settle_pooled(const ApiRow& row, const UsageCounts& usage, Nanos now, RequestRecord& rec) {
    rec.generated = false;
    const std::uint64_t sent = std::max<std::uint32_t>(rec.inputs, 1);
    const bool fits =
        usage.items && (row.items_exact ? *usage.items == sent : *usage.items >= 1 && *usage.items <= sent);
    if (!fits) {
      rec.outcome = Outcome::stream_error;
      rec.error_message = usage.items ? fmt::format("the answer holds {} results for {} items sent", *usage.items, sent)
                                      : std::string("the answer holds no list of results");
      return;
    }
    rec.chunks.push_back({now, 0});
    rec.output_tokens = 0;
    rec.output_tokens_estimated = false;
    rec.outcome = Outcome::ok;
  }

  asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin, RequestIds ids) {
    auto self = shared_from_this();
    if (cancelled) {
      rec.sent = rec.finished = SteadyClock::now() - origin;
      rec.outcome = Outcome::cancelled;
      co_return;
    }
    auto req = make_request(bhttp::verb::post, target.completion_path(), std::move(body), ids, target.stream);
    // A pooled connection the server closed while idle fails before any answer: such a
    // request is retried once on a fresh connection, as HTTP clients do.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool pooled = !idle.empty();
      Outcome failure = Outcome::connect;
      auto c = co_await acquire(failure);
      if (!c) {
        rec.sent = rec.finished = SteadyClock::now() - origin;
        rec.outcome = failure;
        co_return;
      }
      busy.insert(c.get());
      bool reusable = false;
      rec.outcome = Outcome::ok;
      if (c->tls) {
        if (target.stream)
          co_await exchange(*c->tls, *c, req, rec, origin, reusable);
        else
          co_await exchange_plain(*c->tls, *c, req, rec, origin, reusable);
      } else {
        if (target.stream)
          co_await exchange(*c->plain, *c, req, rec, origin, reusable);
        else
          co_await exchange_plain(*c->plain, *c, req, rec, origin, reusable);
      }
      busy.erase(c.get());
      release(std::move(c), reusable && rec.outcome == Outcome::ok);
      const bool stale = pooled && rec.outcome == Outcome::connect && rec.chunks.empty();
      if (!stale || cancelled) break;
    }
    rec.finished = SteadyClock::now() - origin;
  }

  asio::awaitable<PlainResponse> request(std::string method, std::string path, std::string body) {
    auto self = shared_from_this();
    PlainResponse out;
    if (cancelled) {  // after cancel_all() nothing new goes out
      out.body = "cancelled";
      co_return out;
    }
    Outcome failure = Outcome::connect;
    auto c = co_await acquire(failure);
    if (!c) {
      out.body = std::string("cannot connect: ") + std::string(to_string(failure));
      co_return out;
    }
    busy.insert(c.get());
    auto req = make_request(bhttp::string_to_verb(method), target.base_path + path, std::move(body), {}, false);
    if (req.method() == bhttp::verb::get) req.erase(bhttp::field::content_type);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(target.max_response_bytes);
    beast::error_code ec;
    c->lowest().expires_after(target.read_timeout);
    if (c->tls) {
      std::tie(ec, std::ignore) = co_await bhttp::async_write(*c->tls, req, use_tuple);
      if (!ec) std::tie(ec, std::ignore) = co_await bhttp::async_read(*c->tls, c->buffer, parser, use_tuple);
    } else {
      std::tie(ec, std::ignore) = co_await bhttp::async_write(*c->plain, req, use_tuple);
      if (!ec) std::tie(ec, std::ignore) = co_await bhttp::async_read(*c->plain, c->buffer, parser, use_tuple);
    }
    busy.erase(c.get());
    if (ec) {
      out.body = ec.message();
      release(std::move(c), false);
      co_return out;
    }
    out.status = static_cast<int>(parser.get().result_int());
    out.body = std::move(parser.get().body());
    release(std::move(c), parser.keep_alive());
    co_return out;
  }

  void cancel_all() {
    cancelled = true;
    beast::error_code ignored;
    for (auto* c : busy) c->lowest().socket().close(ignored);
    for (auto& c : idle) c->lowest().socket().close(ignored);
    idle.clear();
  }
};

Client::Client(asio::any_io_executor executor, Target target)
    : impl_(std::make_shared<Impl>(executor, std::move(target))) {}
Client::~Client() = default;

asio::awaitable<void> Client::send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                   RequestIds ids) {
  return impl_->send(std::move(body), rec, origin, std::move(ids));
}

Client::PlainResponse Client::request_now(asio::io_context& io, std::string method, std::string path, std::string body,
                                          std::string_view what, const std::function<bool()>& should_stop) {
  PlainResponse out;
  bool ended = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> { out = co_await request(std::move(method), std::move(path), std::move(body)); },
      [&out, &ended, what = std::string(what)](std::exception_ptr e) {
        ended = true;
        if (!e) return;
        log_escaped(what.c_str(), e);
        out = {0, what + ": the request failed"};
      });
  if (should_stop) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer t(io);
          while (!ended) {
            if (should_stop()) {
              cancel_all();
              co_return;
            }
            t.expires_after(std::chrono::milliseconds(50));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
          }
        },
        [what = std::string(what)](std::exception_ptr e) { log_escaped(what.c_str(), e); });
  }
  io.restart();
  io.run();
  return out;
}

asio::awaitable<Client::PlainResponse> Client::request(std::string method, std::string path, std::string body) {
  return impl_->request(std::move(method), std::move(path), std::move(body));
}

void Client::cancel_all() {
  impl_->cancel_all();
}
std::size_t Client::open_connections() const noexcept {
  return impl_->idle.size() + impl_->busy.size();
}
const Target& Client::target() const noexcept {
  return impl_->target;
}

}  // namespace capsweep::llm

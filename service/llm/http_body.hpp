#pragma once
// An HTTP/1.1 response body's framing (RFC 9112 section 6), decoded as the bytes arrive, split
// anywhere: chunked transfer coding (hex sizes, chunk extensions ignored, trailer fields
// skipped), a Content-Length, or everything until the connection closes. The streaming client
// reads the socket itself and hands each read here, so that a read holding many SSE events
// costs one pass over its bytes, not one parser call per chunk.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace capsweep::llm {

class BodyDecoder {
 public:
  static BodyDecoder chunked() { return BodyDecoder(State::size); }
  static BodyDecoder length(std::uint64_t n) {
    BodyDecoder d(n == 0 ? State::done : State::length);
    d.remaining_ = n;
    return d;
  }
  static BodyDecoder until_close() { return BodyDecoder(State::until_close); }

  // Decodes bytes off the wire, calling on_data(std::string_view) with each piece of body (views
  // into `in`). Returns how many bytes of `in` belong to this body: fewer than in.size() only
  // once it is done (the rest is not this answer's). On malformed framing failed() turns true
  // and nothing more is decoded.
  template <class F>
  std::size_t feed(std::string_view in, F&& on_data) {
    std::size_t at = 0;
    while (at < in.size() && state_ != State::done && state_ != State::failed) {
      if (state_ == State::data || state_ == State::length || state_ == State::until_close) {
        const std::size_t take = state_ == State::until_close
                                     ? in.size() - at
                                     : static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size() - at));
        on_data(in.substr(at, take));
        at += take;
        if (state_ != State::until_close && (remaining_ -= take) == 0)
          state_ = state_ == State::data ? State::data_cr : State::done;
      } else {
        step(in[at++]);
      }
    }
    return at;
  }

  // The connection closed: a body read until the close is complete, any other is cut short.
  void end_of_input() noexcept {
    if (state_ == State::until_close) state_ = State::done;
    if (state_ != State::done) fail("the connection closed before the body ended");
  }

  bool done() const noexcept { return state_ == State::done; }
  bool failed() const noexcept { return state_ == State::failed; }
  const char* error() const noexcept { return error_; }

 private:
  enum class State {
    size,
    extension,
    size_lf,
    data,
    data_cr,
    data_lf,
    trailer_start,
    trailer,
    trailer_lf,
    length,
    until_close,
    done,
    failed
  };
  static constexpr std::uint64_t kMaxChunk = std::uint64_t{1} << 48;
  static constexpr std::size_t kMaxLine = 4096;      // a size line with its extensions
  static constexpr std::size_t kMaxTrailers = 8192;  // every trailer field together

  explicit BodyDecoder(State s) : state_(s) {}
  void fail(const char* why) noexcept {
    state_ = State::failed;
    error_ = why;
  }
  void step(char c) noexcept;  // one byte of framing (http_body.cpp)
  void end_size_line() noexcept;

  State state_;
  std::uint64_t remaining_ = 0;  // of the chunk or of the Content-Length
  std::size_t line_ = 0;         // bytes of the size line or of the trailers so far
  bool digits_ = false;          // the size line has a hex digit
  const char* error_ = "";
};

}  // namespace capsweep::llm

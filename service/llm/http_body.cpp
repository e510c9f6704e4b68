#include "llm/http_body.hpp"

namespace capsweep::llm {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// A size line has ended (its LF): a last chunk of size 0 leads to the trailers.
void BodyDecoder::end_size_line() noexcept {
  if (!digits_) return fail("a chunk size line without a size");
  state_ = remaining_ == 0 ? State::trailer_start : State::data;
  digits_ = false;
  line_ = 0;
}

void BodyDecoder::step(char c) noexcept {
  if ((state_ == State::size || state_ == State::extension) && ++line_ > kMaxLine)
    return fail("a chunk size line longer than 4096 bytes");
  switch (state_) {
    case State::size:
      if (const int v = hex_value(c); v >= 0) {
        if (remaining_ >= kMaxChunk / 16) return fail("a chunk size past 2^48 bytes");
        remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(v);
        digits_ = true;
      } else if (c == ';' || c == ' ' || c == '\t') {
        state_ = State::extension;  // chunk extensions (and the spaces before them) say nothing here
      } else if (c == '\r') {
        state_ = State::size_lf;
      } else if (c == '\n') {
        end_size_line();
      } else {
        fail("a chunk size that is not hexadecimal");
      }
      return;
    case State::extension:
      if (c == '\r') state_ = State::size_lf;
      if (c == '\n') end_size_line();
      return;
    case State::size_lf:
      return c == '\n' ? end_size_line() : fail("a chunk size line not ended by CRLF");
    case State::data_cr:
      if (c == '\r') {
        state_ = State::data_lf;
        return;
      }
      [[fallthrough]];  // a bare LF ends the chunk too
    case State::data_lf:
      if (c != '\n') return fail("chunk data not followed by CRLF");
      state_ = State::size;
      return;
    case State::trailer_start:
    case State::trailer:
    case State::trailer_lf:
      break;
    default:
      return;
  }
  if (++line_ > kMaxTrailers) return fail("trailer fields longer than 8192 bytes");
  if (c == '\n') {  // an empty line ends the body; any other line is a trailer field
    state_ = state_ == State::trailer ? State::trailer_start : State::done;
  } else if (c == '\r') {
    if (state_ == State::trailer_start) state_ = State::trailer_lf;
  } else if (state_ == State::trailer_lf) {
    fail("a trailer section not ended by CRLF");
  } else {
    state_ = State::trailer;
  }
}

}  // namespace capsweep::llm

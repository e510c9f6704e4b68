// W3C Trace Context ids: one trace per step, one span per request, derived alike everywhere;
// the traceparent header's format and its parser's errors.
#include "core/trace_context.hpp"

#include <catch2/catch.hpp>
#include <set>

using namespace capsweep;

TEST_CASE("trace context: a step's trace and its requests' spans are derived, distinct and valid") {
  const TraceId t = step_trace_id("sw-abc", 3);
  CHECK(t.valid());
  CHECK(t == step_trace_id("sw-abc", 3));  // the same on every process
  CHECK_FALSE(t == step_trace_id("sw-abc", 4));
  CHECK_FALSE(t == step_trace_id("sw-abd", 3));
  CHECK(t.hex().size() == 32);
  std::set<std::uint64_t> spans;
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    const std::uint64_t s = request_span_id(t, i);
    CHECK(s != 0);
    spans.insert(s);
  }
  CHECK(spans.size() == 10'000);
  // Another step's request of the same index is another span.
  CHECK(request_span_id(t, 7) != request_span_id(step_trace_id("sw-abc", 4), 7));
}

TEST_CASE("trace context: traceparent is version 00, sampled, and parses back to its ids") {
  const TraceId t = step_trace_id("sw-1", 0);
  const std::string h = traceparent(t, 42);
  REQUIRE(h.size() == 55);
  CHECK(h.substr(0, 3) == "00-");
  CHECK(h.substr(3, 32) == t.hex());
  CHECK(h.substr(52) == "-01");
  const auto p = parse_traceparent(h);
  REQUIRE(p);
  CHECK(p->trace == t);
  CHECK(p->span == request_span_id(t, 42));
  CHECK(p->flags == 1);
  CHECK(traceparent(TraceId{}, 1).empty());  // no trace: no header
  // The W3C specification's own example.
  const auto w3c = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  REQUIRE(w3c);
  CHECK(w3c->trace.hi == 0x4bf92f3577b34da6ULL);
  CHECK(w3c->trace.lo == 0xa3ce929d0e0e4736ULL);
  CHECK(w3c->span == 0x00f067aa0ba902b7ULL);
  const auto id = parse_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  REQUIRE(id);
  CHECK(id->hex() == "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST_CASE("trace context: malformed ids and headers are refused") {
  for (const char* bad :
       {"", "4bf92f3577b34da6a3ce929d0e0e473", "4bf92f3577b34da6a3ce929d0e0e47361", "4BF92F3577B34DA6A3CE929D0E0E4736",
        "4bf92f3577b34da6a3ce929d0e0e473g", "00000000000000000000000000000000"}) {
    INFO(bad);
    CHECK_FALSE(parse_trace_id(bad));
  }
  for (const char* bad : {
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // another version
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // no trace
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // no span
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",   // short flags
           "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",  // a wrong separator
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",  // flags not hex
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
       }) {
    INFO(bad);
    CHECK_FALSE(parse_traceparent(bad));
  }
}

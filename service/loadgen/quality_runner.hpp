#pragma once
// Asks a target the items of a regression job's quality checks: every request body sent once,
// at most N in flight, on a thread of its own, each answer kept whole (its SSE payloads) for
// the checks. Not a timed step: no schedule, no latency verdict. Cancellable from any thread.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/record.hpp"
#include "loadgen/endpoint.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::loadgen {

struct QualityReply {
  RequestRecord record;             // outcome, token counts, times from the run's start
  std::vector<std::string> events;  // what the target sent (SSE data payloads, or the body)
  bool asked = false;               // false: the run was cancelled before this item was sent
};

class QualityRunner : public RunControl {
 public:
  explicit QualityRunner(EndpointFactory endpoint);
  QualityRunner(const QualityRunner&) = delete;
  QualityRunner& operator=(const QualityRunner&) = delete;

  // Sends every body (at most `concurrency` in flight) and returns the replies in the order of
  // `bodies`; blocks until all ended or the run was cancelled.
  std::vector<QualityReply> run(const std::vector<std::string>& bodies, std::uint32_t concurrency);
  // Aborts the requests in flight and sends no more; run() returns soon.
  void cancel() override;
  const Progress& progress() const noexcept override { return progress_; }

 private:
  EndpointFactory endpoint_;
  Progress progress_;
  std::atomic<bool> cancel_requested_{false};
  std::mutex active_mutex_;
  void* active_ = nullptr;  // the running io_context's state, for cancel()
};

}  // namespace capsweep::loadgen

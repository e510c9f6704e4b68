#pragma once
// Minimal Prometheus text-format (0.0.4) writers for capsweep-llmsim's /metrics.

#include <cstdint>
#include <string>
#include <vector>

namespace capsweep::llmsim {

// A cumulative histogram with fixed upper bounds (seconds), like prometheus_client's.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds) noexcept;
  // Appends HELP/TYPE lines and the _bucket/_sum/_count samples with `labels` ('k="v"').
  void render(std::string& out, const std::string& name, const std::string& help,
              const std::string& labels) const;
  std::uint64_t count() const noexcept { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, non-cumulative; last = +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// Appends one HELP/TYPE header and a single sample.
void render_sample(std::string& out, const std::string& name, const char* type,
                   const std::string& help, const std::string& labels, double value);

}  // namespace capsweep::llmsim

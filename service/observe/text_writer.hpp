#pragma once
// The one Prometheus text-format (0.0.4) writer of the project: capsweepd's /metrics and
// capsweep-llmsim's use it alike. Metric names are the caller's (valid by construction);
// label values are escaped here.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep::observe {

// `key="value"` with the value escaped as the text format wants (\\, \", \n); other control
// characters are replaced by '?', so any text (a route, a model name) makes a valid label.
std::string label(std::string_view key, std::string_view value);

// A cumulative histogram with fixed upper bounds, like prometheus_client's.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  // Appends the _bucket/_sum/_count samples with `labels` ('k="v",...', may be empty);
  // with `header` the HELP/TYPE lines first.
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
              bool header = true) const;
  std::uint64_t count() const noexcept { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, non-cumulative; last = +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// Appends the HELP/TYPE header of a metric.
void render_header(std::string& out, const std::string& name, const char* type, const std::string& help);
// Appends one sample line (`labels` may be empty).
void render_value(std::string& out, const std::string& name, const std::string& labels, double value);
// Appends a header and a single sample.
void render_sample(std::string& out, const std::string& name, const char* type, const std::string& help,
                   const std::string& labels, double value);

}  // namespace capsweep::observe

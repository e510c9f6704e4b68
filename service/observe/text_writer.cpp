#include "observe/text_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace capsweep::observe {

namespace {

// "{a=\"b\"}" or "" for no labels; `extra` is appended inside the braces.
std::string braces(const std::string& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  return "{" + labels + (labels.empty() || extra.empty() ? "" : ",") + extra + "}";
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

std::string label(std::string_view key, std::string_view value) {
  std::string out(key);
  out += "=\"";
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += '?';
    else
      out += c;
  }
  out += '"';
  return out;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) noexcept {
  const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
                       bool header) const {
  if (header) render_header(out, name, "histogram", help);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    fmt::format_to(std::back_inserter(out), "{}_bucket{} {}\n", name,
                   braces(labels, fmt::format("le=\"{}\"", bounds_[i])), cumulative);
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{} {}\n", name, braces(labels, "le=\"+Inf\""), count_);
  fmt::format_to(std::back_inserter(out), "{}_sum{} {}\n{}_count{} {}\n", name, braces(labels), number(sum_), name,
                 braces(labels), count_);
}

void render_header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void render_value(std::string& out, const std::string& name, const std::string& labels, double value) {
  fmt::format_to(std::back_inserter(out), "{}{} {}\n", name, braces(labels), number(value));
}

void render_sample(std::string& out, const std::string& name, const char* type, const std::string& help,
                   const std::string& labels, double value) {
  render_header(out, name, type, help);
  render_value(out, name, labels, value);
}

}  // namespace capsweep::observe

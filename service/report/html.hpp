#pragma once
// The sweep report: one self-contained HTML page (inline CSS and SVG, no script, no font or
// file from elsewhere; works offline) with the verdict, the spec, charts drawn by our own code
// from the stored steps, the step table and the warnings. Pure: JSON in, text out.

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace capsweep::report {

// `sweep` as GET /v1/sweeps/{id} returns it, `steps` the "steps" array of .../steps, and for
// a scenario job `windows` the "windows" array of .../windows (its timeline).
std::string render_report(const nlohmann::json& sweep, const nlohmann::json& steps,
                          const nlohmann::json& windows = nlohmann::json::array());

// Chart building blocks, exposed for tests.
struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
};
struct Marker {
  std::string label;
  double value = 0;
  std::string color;
};
struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Marker> hlines;  // e.g. the SLO bound
  std::vector<Marker> vlines;  // e.g. the knee and the max SLO rate
  bool log_y = false;
};
// An <svg> element: axes with "nice" ticks (1-2-5 steps; powers of ten on a log axis), a
// polyline and circles per series, dashed marker lines, a legend.
std::string render_chart(const Chart& chart);
// Tick values covering [lo, hi]: 1-2-5 multiples of a power of ten, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

}  // namespace capsweep::report

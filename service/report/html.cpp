#include "report/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "report/html_text.hpp"

namespace capsweep::report {

namespace {

using json = nlohmann::json;
using namespace detail;

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 10000 || a < 0.01) return fmt::format("{:.0e}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000);
}

constexpr double kW = 640, kH = 360, kLeft = 70, kRight = 20, kTop = 40, kBottom = 60;

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  // The 1-2-5 step nearest the raw step (in ratio).
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::fabs(std::log(m * mag / raw)) < std::fabs(std::log(step / raw))) step = m * mag;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return out;
}

namespace {

// A chart's plot area: the data's ranges (widened to round ticks) and the scales from data to
// the SVG's coordinates.
struct Frame {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  bool log_y = false;
  std::vector<double> xticks, yticks;
  double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double sx(double x) const { return kLeft + (x - x0) / (x1 - x0) * pw; }
  double sy(double y) const {
    const double f = log_y ? (std::log10(std::max(y, y0)) - std::log10(y0)) / (std::log10(y1) - std::log10(y0))
                           : (y - y0) / (y1 - y0);
    return kTop + ph - std::clamp(f, 0.0, 1.0) * ph;
  }
};

// The data's extent over every series and marker (a log axis skips values <= 0); nullopt when
// nothing is drawable.
std::optional<Frame> chart_frame(const Chart& c) {
  Frame f;
  f.log_y = c.log_y;
  auto take_y = [&](double y) {
    if (!std::isfinite(y) || (c.log_y && y <= 0)) return;
    f.y0 = std::min(f.y0, y);
    f.y1 = std::max(f.y1, y);
  };
  for (const auto& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x)) continue;
      f.x0 = std::min(f.x0, x);
      f.x1 = std::max(f.x1, x);
      take_y(y);
    }
  }
  for (const auto& m : c.hlines) take_y(m.value);
  for (const auto& m : c.vlines) {
    if (std::isfinite(m.value)) f.x0 = std::min(f.x0, m.value), f.x1 = std::max(f.x1, m.value);
  }
  if (!(f.x1 >= f.x0) || !(f.y1 >= f.y0)) return std::nullopt;
  if (f.x1 == f.x0) f.x0 -= 1, f.x1 += 1;
  f.x0 = std::min(f.x0, 0.0);
  if (c.log_y) {
    const double lo = std::pow(10.0, std::floor(std::log10(f.y0))), hi = std::pow(10.0, std::ceil(std::log10(f.y1)));
    f.y0 = lo;
    f.y1 = hi > lo ? hi : lo * 10;
    for (double t = f.y0; t <= f.y1 * 1.0001; t *= 10) f.yticks.push_back(t);
  } else {
    f.y0 = std::min(f.y0, 0.0);
    if (f.y1 == f.y0) f.y1 = f.y0 + 1;
    f.y1 *= 1.05;
    f.yticks = nice_ticks(f.y0, f.y1);
  }
  f.xticks = nice_ticks(f.x0, f.x1);
  return f;
}

// The plot's frame, grid, ticks and axis labels.
std::string svg_axes(const Chart& c, const Frame& f) {
  std::string svg =
      fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" class="plot"/>)", kLeft, kTop, f.pw, f.ph);
  for (double t : f.xticks) {
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)",
        f.sx(t), kTop, kTop + f.ph, kTop + f.ph + 16, tick_label(t));
  }
  for (double t : f.yticks) {
    svg += fmt::format(
        R"(<line x1="{1}" y1="{0:.1f}" x2="{2}" y2="{0:.1f}" class="grid"/><text x="{3}" y="{4:.1f}" class="tick" text-anchor="end">{5}</text>)",
        f.sy(t), kLeft, kLeft + f.pw, kLeft - 6, f.sy(t) + 4, tick_label(t));
  }
  svg += fmt::format(R"(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)", kLeft + f.pw / 2, kH - 28,
                     esc(c.x_label));
  svg += fmt::format(
      R"svg(<text x="16" y="{0}" class="axis" text-anchor="middle" transform="rotate(-90 16 {0})">{1}{2}</text>)svg",
      kTop + f.ph / 2, esc(c.y_label), c.log_y ? " (log)" : "");
  return svg;
}

// Horizontal markers are labelled at the left end, vertical ones stacked from the top, to the
// left of their line when it lies in the right half, so labels do not collide.
std::string svg_markers(const Chart& c, const Frame& f) {
  std::string svg;
  for (const auto& m : c.hlines) {
    if (!std::isfinite(m.value)) continue;
    svg += fmt::format(
        R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="{}" class="marker"/><text x="{}" y="{:.1f}" class="mlabel" fill="{}">{}</text>)",
        kLeft, f.sy(m.value), kLeft + f.pw, f.sy(m.value), m.color, kLeft + 4, f.sy(m.value) - 4, m.color,
        esc(m.label));
  }
  int stacked = 0;
  for (const auto& m : c.vlines) {
    if (!std::isfinite(m.value)) continue;
    const bool right_half = f.sx(m.value) > kLeft + f.pw / 2;
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="{3}" class="marker"/><text x="{4:.1f}" y="{5}" class="mlabel" fill="{3}" text-anchor="{6}">{7}</text>)",
        f.sx(m.value), kTop, kTop + f.ph, m.color, f.sx(m.value) + (right_half ? -4 : 4), kTop + 24 + 14 * stacked,
        right_half ? "end" : "start", esc(m.label));
    ++stacked;
  }
  return svg;
}

// Each series as a line with a dot (and its value as a tooltip) per point, and the legend.
std::string svg_series(const Chart& c, const Frame& f) {
  std::string svg;
  double legend_x = kLeft;
  for (const auto& s : c.series) {
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string poly;
    std::string dots;
    for (const auto& [x, y] : pts) {
      if (!std::isfinite(x) || !std::isfinite(y) || (c.log_y && y <= 0)) continue;
      poly += fmt::format("{:.1f},{:.1f} ", f.sx(x), f.sy(y));
      dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}: {:g} at {:g}</title></circle>)",
                          f.sx(x), f.sy(y), s.color, esc(s.name), y, x);
    }
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" class="series"/>{})", poly, s.color, dots);
    svg += fmt::format(
        R"(<rect x="{:.1f}" y="{}" width="12" height="12" fill="{}" class="legend-key"/><text x="{:.1f}" y="{}" class="legend">{}</text>)",
        legend_x, kH - 16, s.color, legend_x + 16, kH - 6, esc(s.name));
    legend_x += 30 + 7.0 * static_cast<double>(s.name.size());
  }
  return svg;
}

}  // namespace

std::string render_chart(const Chart& c) {
  std::string svg = fmt::format(
      R"(<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">)",
      kW, kH, kW, kH, esc(c.title));
  svg += fmt::format(R"(<text x="{}" y="22" class="title">{}</text>)", kLeft, esc(c.title));
  const auto frame = chart_frame(c);
  if (!frame) {
    svg += fmt::format(R"(<text x="{}" y="{}" class="empty">no data</text></svg>)", kW / 2 - 30, kH / 2);
    return svg;
  }
  svg += svg_axes(c, *frame);
  svg += svg_markers(c, *frame);
  svg += svg_series(c, *frame);
  svg += "</svg>";
  return svg;
}

}  // namespace capsweep::report

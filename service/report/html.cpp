#include "report/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

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

std::string render_chart(const Chart& c) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto take_y = [&](double y) {
    if (!std::isfinite(y) || (c.log_y && y <= 0)) return;
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  };
  for (const auto& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      take_y(y);
    }
  }
  for (const auto& m : c.hlines) take_y(m.value);
  for (const auto& m : c.vlines) {
    if (std::isfinite(m.value)) x0 = std::min(x0, m.value), x1 = std::max(x1, m.value);
  }
  std::string svg = fmt::format(
      R"(<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">)",
      kW, kH, kW, kH, esc(c.title));
  svg += fmt::format(R"(<text x="{}" y="22" class="title">{}</text>)", kLeft, esc(c.title));
  if (!(x1 >= x0) || !(y1 >= y0)) {
    svg += fmt::format(R"(<text x="{}" y="{}" class="empty">no data</text></svg>)", kW / 2 - 30, kH / 2);
    return svg;
  }
  if (x1 == x0) x0 -= 1, x1 += 1;
  x0 = std::min(x0, 0.0);
  std::vector<double> yticks;
  if (c.log_y) {
    const double lo = std::pow(10.0, std::floor(std::log10(y0))), hi = std::pow(10.0, std::ceil(std::log10(y1)));
    y0 = lo;
    y1 = hi > lo ? hi : lo * 10;
    for (double t = y0; t <= y1 * 1.0001; t *= 10) yticks.push_back(t);
  } else {
    y0 = std::min(y0, 0.0);
    if (y1 == y0) y1 = y0 + 1;
    y1 *= 1.05;
    yticks = nice_ticks(y0, y1);
  }
  const auto xticks = nice_ticks(x0, x1);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto sy = [&](double y) {
    const double f = c.log_y ? (std::log10(std::max(y, y0)) - std::log10(y0)) / (std::log10(y1) - std::log10(y0))
                             : (y - y0) / (y1 - y0);
    return kTop + ph - std::clamp(f, 0.0, 1.0) * ph;
  };
  // Axes, grid and ticks.
  svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" class="plot"/>)", kLeft, kTop, pw, ph);
  for (double t : xticks) {
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)",
        sx(t), kTop, kTop + ph, kTop + ph + 16, tick_label(t));
  }
  for (double t : yticks) {
    svg += fmt::format(
        R"(<line x1="{1}" y1="{0:.1f}" x2="{2}" y2="{0:.1f}" class="grid"/><text x="{3}" y="{4:.1f}" class="tick" text-anchor="end">{5}</text>)",
        sy(t), kLeft, kLeft + pw, kLeft - 6, sy(t) + 4, tick_label(t));
  }
  svg += fmt::format(R"(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)", kLeft + pw / 2, kH - 28,
                     esc(c.x_label));
  svg += fmt::format(
      R"svg(<text x="16" y="{0}" class="axis" text-anchor="middle" transform="rotate(-90 16 {0})">{1}{2}</text>)svg",
      kTop + ph / 2, esc(c.y_label), c.log_y ? " (log)" : "");
  // Markers.
  // Horizontal markers are labelled at the left end, vertical ones stacked from the top, to
  // the left of their line when it lies in the right half, so labels do not collide.
  for (const auto& m : c.hlines) {
    if (!std::isfinite(m.value)) continue;
    svg += fmt::format(
        R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="{}" class="marker"/><text x="{}" y="{:.1f}" class="mlabel" fill="{}">{}</text>)",
        kLeft, sy(m.value), kLeft + pw, sy(m.value), m.color, kLeft + 4, sy(m.value) - 4, m.color, esc(m.label));
  }
  int stacked = 0;
  for (const auto& m : c.vlines) {
    if (!std::isfinite(m.value)) continue;
    const bool right_half = sx(m.value) > kLeft + pw / 2;
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="{3}" class="marker"/><text x="{4:.1f}" y="{5}" class="mlabel" fill="{3}" text-anchor="{6}">{7}</text>)",
        sx(m.value), kTop, kTop + ph, m.color, sx(m.value) + (right_half ? -4 : 4), kTop + 24 + 14 * stacked,
        right_half ? "end" : "start", esc(m.label));
    ++stacked;
  }
  // Series and legend.
  double legend_x = kLeft;
  for (const auto& s : c.series) {
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string poly;
    std::string dots;
    for (const auto& [x, y] : pts) {
      if (!std::isfinite(x) || !std::isfinite(y) || (c.log_y && y <= 0)) continue;
      poly += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
      dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}: {:g} at {:g}</title></circle>)",
                          sx(x), sy(y), s.color, esc(s.name), y, x);
    }
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" class="series"/>{})", poly, s.color, dots);
    svg += fmt::format(
        R"(<rect x="{:.1f}" y="{}" width="12" height="12" fill="{}" class="legend-key"/><text x="{:.1f}" y="{}" class="legend">{}</text>)",
        legend_x, kH - 16, s.color, legend_x + 16, kH - 6, esc(s.name));
    legend_x += 30 + 7.0 * static_cast<double>(s.name.size());
  }
  svg += "</svg>";
  return svg;
}

}  // namespace capsweep::report

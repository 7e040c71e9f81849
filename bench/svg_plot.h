// A line chart as a standalone SVG file, hand-written so `make bench` needs nothing to draw its
// plot: a few series of (x, y) points, x on a log2 axis (job counts), y linear from zero, and
// optional horizontal reference lines (the hashing limit). Header-only and torch-free, so the unit
// tests check it without the bench's dependencies.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/text.h"

namespace ckpt::bench {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y); x > 0
};

struct PlotReference {
  std::string label;
  double y = 0;
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  std::vector<PlotReference> references;
};

// A "nice" upper bound for a linear axis starting at 0: 1, 2 or 5 times a power of ten, >= top.
inline double nice_axis_max(double top) {
  if (!(top > 0) || !std::isfinite(top)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(top)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * power >= top * (1 - 1e-12)) return step * power;
  }
  return 10 * power;
}

inline std::string render_svg(const LinePlot& plot) {
  constexpr double kWidth = 640, kHeight = 400, kLeft = 70, kRight = 170, kTop = 40, kBottom = 50;
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;

  double x_min = 0, x_max = 0, y_top = 0;
  bool any = false;
  for (const auto& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (!(x > 0) || !std::isfinite(y)) continue;
      x_min = any ? std::min(x_min, x) : x;
      x_max = any ? std::max(x_max, x) : x;
      y_top = std::max(y_top, y);
      any = true;
    }
  }
  for (const auto& r : plot.references) y_top = std::max(y_top, r.y);
  if (!any) x_min = x_max = 1;
  const double lx_min = std::log2(x_min), lx_max = std::log2(x_max);
  const double y_max = nice_axis_max(y_top * 1.05);
  auto px = [&](double x) {
    return lx_max > lx_min ? kLeft + (std::log2(x) - lx_min) / (lx_max - lx_min) * plot_w
                           : kLeft + plot_w / 2;
  };
  auto py = [&](double y) { return kTop + plot_h - y / y_max * plot_h; };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    return std::string(buf);
  };
  auto tick = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
                    num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(kWidth / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" +
         html_escape(plot.title) + "</text>\n";
  // Axes, y grid and ticks.
  for (int i = 0; i <= 5; ++i) {
    const double v = y_max * i / 5, y = py(v);
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + plot_w) + "\" y2=\"" +
           num(y) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + tick(v) +
           "</text>\n";
  }
  std::vector<double> xs;
  for (const auto& s : plot.series)
    for (const auto& p : s.points)
      if (p.first > 0) xs.push_back(p.first);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs) {
    svg += "<text x=\"" + num(px(x)) + "\" y=\"" + num(kTop + plot_h + 18) + "\" text-anchor=\"middle\">" +
           tick(x) + "</text>\n";
  }
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + plot_h) + "\" x2=\"" + num(kLeft + plot_w) +
         "\" y2=\"" + num(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(kLeft) + "\" y2=\"" +
         num(kTop + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + num(kLeft + plot_w / 2) + "\" y=\"" + num(kHeight - 10) +
         "\" text-anchor=\"middle\">" + html_escape(plot.x_label) + "</text>\n";
  svg += "<text transform=\"translate(16 " + num(kTop + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(plot.y_label) + "</text>\n";
  // Reference lines, then the series, then the legend.
  for (const auto& r : plot.references) {
    const double y = py(r.y);
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + plot_w) + "\" y2=\"" +
           num(y) + "\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n";
    // Labelled inside the plot, just above its line, so it never collides with the legend.
    svg += "<text x=\"" + num(kLeft + 6) + "\" y=\"" + num(y - 5) + "\" fill=\"#555\">" +
           html_escape(r.label) + "</text>\n";
  }
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const auto& s = plot.series[i];
    const std::string color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string points;
    for (const auto& [x, y] : s.points) {
      if (!(x > 0) || !std::isfinite(y)) continue;
      points += (points.empty() ? "" : " ") + num(px(x)) + "," + num(py(y));
      svg += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" + color + "\"/>\n";
    }
    if (!points.empty()) {
      svg +=
          "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    }
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    svg += "<line x1=\"" + num(kLeft + plot_w + 6) + "\" y1=\"" + num(ly) + "\" x2=\"" +
           num(kLeft + plot_w + 26) + "\" y2=\"" + num(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + num(kLeft + plot_w + 30) + "\" y=\"" + num(ly + 4) + "\">" + html_escape(s.label) +
           "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace ckpt::bench

#include "bench/svg_plot.h"

#include <gtest/gtest.h>

#include <limits>

namespace ckpt::bench {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlot, EscapesMarkup) {
  EXPECT_EQ(html_escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

TEST(SvgPlot, AxisMaxIsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(nice_axis_max(3.4), 5);
  EXPECT_EQ(nice_axis_max(0.9), 1);
  EXPECT_EQ(nice_axis_max(1.0), 1);
  EXPECT_EQ(nice_axis_max(11), 20);
  EXPECT_EQ(nice_axis_max(0), 1);
  EXPECT_EQ(nice_axis_max(std::numeric_limits<double>::quiet_NaN()), 1);
}

// One polyline and one marker per plotted point; points that cannot be drawn (NaN, x <= 0) are
// left out rather than written as "nan" coordinates.
TEST(SvgPlot, DrawsEverySeriesAndSkipsUnplottablePoints) {
  LinePlot plot;
  plot.title = "verify <throughput>";
  plot.x_label = "jobs";
  plot.y_label = "GB/s";
  plot.series = {{"256 MiB", {{1, 1.5}, {2, 3.0}, {4, 3.1}, {8, 3.0}}},
                 {"1 GiB", {{1, 1.6}, {2, std::numeric_limits<double>::quiet_NaN()}, {0, 2}, {8, 3.2}}}};
  plot.references = {{"hashing limit", 3.5}};
  const std::string svg = render_svg(plot);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), 2u);
  EXPECT_EQ(count_of(svg, "<circle"), 6u);
  EXPECT_EQ(count_of(svg, "stroke-dasharray"), 1u);
  EXPECT_NE(svg.find("verify &lt;throughput&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(SvgPlot, EmptyPlotIsStillAnSvg) {
  const std::string svg = render_svg(LinePlot{});
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), 0u);
}

}  // namespace
}  // namespace ckpt::bench

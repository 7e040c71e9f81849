// report.html for `ckptcheck pilot`: self-contained (inline CSS and SVG, no scripts). The matrix
// as a table with bar charts of step memory and step time per variant, the checks and the words
// under them; the scaling study as measured vs predicted step time per world size.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ckpt {

// Renders a report built by run_pilot_study(); tolerates missing keys (renders what is there).
std::string render_pilot_html(const nlohmann::json& report);

// One horizontal bar chart: a bar per (label, value), scaled to the largest; `unit` follows each
// value. Labels are escaped. Separate so tests can check the geometry.
std::string svg_bar_chart(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                          const std::string& unit);

}  // namespace ckpt

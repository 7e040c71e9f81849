// report.html: the drill report for people. Self-contained (inline CSS and SVG, no scripts, no
// network): verdict first, then reference vs resumed loss curves, the divergence table, the
// checks, timings and memory. Every string from the report is escaped, since tensor names and
// error messages come from files on disk.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/text.h"  // html_escape, which the report renderers share

namespace ckpt {

// Renders a report built by drill_report_json(); tolerates missing keys (renders what is there).
std::string render_drill_html(const nlohmann::json& report);

}  // namespace ckpt

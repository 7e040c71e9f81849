#include "verifier/tensors/state_compare.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "base/json_fields.h"
#include "base/text.h"
#include "formats/dtype.h"

namespace ckpt {

bool within_tolerance(double reference, double resumed, const Tolerance& tolerance) {
  if (std::isnan(reference) || std::isnan(resumed)) return std::isnan(reference) && std::isnan(resumed);
  if (reference == resumed) return true;  // also equal infinities
  return std::fabs(resumed - reference) <= tolerance.atol + tolerance.rtol * std::fabs(reference);
}

namespace {

double abs_diff(double reference, double resumed) {
  if (std::isnan(reference) && std::isnan(resumed)) return 0;
  if (reference == resumed) return 0;
  return std::fabs(resumed - reference);  // inf or nan when one side is not finite
}

// Timings, and the memory a program reports of one step (program_contract.h): reported, never
// compared (two runs of the same program legitimately differ in both).
bool is_timing_field(const std::string& name) {
  return ends_with(name, "_ms") || ends_with(name, "_seconds") || name == "peak_memory_bytes";
}

enum class LineKind { kStep, kCheckpoint, kOtherEvent, kMalformed };

// Python's json.dumps writes NaN, Infinity and -Infinity, which JSON lacks; a training run that
// diverges writes them. Outside strings they become tagged strings that number_of() reads back.
std::string with_python_specials_tagged(const std::string& line) {
  if (line.find("NaN") == std::string::npos && line.find("Infinity") == std::string::npos) return line;
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size())
        out += line[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (line.compare(i, 3, "NaN") == 0) {
      out += "\"\\u0000nan\"";
      i += 2;
    } else if (line.compare(i, 9, "-Infinity") == 0) {
      out += "\"\\u0000-inf\"";
      i += 8;
    } else if (line.compare(i, 8, "Infinity") == 0) {
      out += "\"\\u0000inf\"";
      i += 7;
    } else {
      out += c;
    }
  }
  return out;
}

// A JSON number, or one of the tagged specials above.
std::optional<double> number_of(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == std::string("\0nan", 4)) return std::numeric_limits<double>::quiet_NaN();
  if (s == std::string("\0inf", 4)) return std::numeric_limits<double>::infinity();
  if (s == std::string("\0-inf", 5)) return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

// `why` says what a malformed line lacks, for the error that quotes it.
LineKind parse_metric_line(const std::string& line, StepRecord* step, CheckpointEvent* event,
                           std::string* why) {
  const auto parsed = parse_json(with_python_specials_tagged(line), "metrics line");
  if (!parsed.is_ok() || !parsed->is_object()) {
    *why = parsed.is_ok() ? "not a JSON object" : "not JSON";
    return LineKind::kMalformed;
  }
  const nlohmann::json& j = *parsed;
  auto step_it = j.find("step");
  const bool has_step = step_it != j.end() && step_it->is_number_integer();
  auto event_it = j.find("event");
  if (event_it != j.end()) {
    if (!event_it->is_string()) {
      *why = "\"event\" is not a string";
      return LineKind::kMalformed;
    }
    if (event_it->get<std::string>() != "checkpoint") return LineKind::kOtherEvent;
    auto path = j.find("path");
    if (!has_step || path == j.end() || !path->is_string()) {
      *why = "a checkpoint event needs an integer \"step\" and a string \"path\"";
      return LineKind::kMalformed;
    }
    event->step = step_it->get<int64_t>();
    event->path = path->get<std::string>();
    return LineKind::kCheckpoint;
  }
  auto loss = j.find("loss");
  const std::optional<double> loss_value = loss == j.end() ? std::nullopt : number_of(*loss);
  if (!has_step || !loss_value) {
    *why = !has_step ? "no integer \"step\"" : loss == j.end() ? "no \"loss\"" : "\"loss\" is not a number";
    return LineKind::kMalformed;
  }
  step->step = step_it->get<int64_t>();
  step->loss = *loss_value;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "step" || it.key() == "loss" || is_timing_field(it.key())) continue;
    if (const auto v = number_of(*it)) step->values[it.key()] = *v;
  }
  return LineKind::kStep;
}

// A line as an error message quotes it: at most 120 characters, control characters as '?'.
std::string quoted_line(const std::string& line) {
  std::string q;
  for (const char c : line.substr(0, 120)) q += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
  return "`" + q + (line.size() > 120 ? "...`" : "`");
}

}  // namespace

double relative_difference(double reference, double value) {
  const double d = abs_diff(reference, value);
  if (d == 0) return 0;
  return reference == 0 ? std::numeric_limits<double>::infinity() : d / std::fabs(reference);
}

void raise_to(double* current, double value) {
  if (std::isnan(value) || (!std::isnan(*current) && value > *current)) *current = value;
}

std::string resolve_announced_path(const std::string& path, const std::string& checkpoint_dir) {
  if (path.empty() || path[0] == '/' || checkpoint_dir.empty()) return path;
  return checkpoint_dir + "/" + path;
}

Result<MetricsLog> read_metrics_log(const std::string& path, const std::string& checkpoint_dir,
                                    bool complete_lines_only) {
  std::ifstream in(path);
  if (!in) return Status::io_error(path + ": cannot open metrics file");
  std::vector<std::string> lines;
  std::string line;
  bool last_complete = true;
  while (std::getline(in, line)) {
    last_complete = !in.eof();
    lines.push_back(line);
  }
  if (complete_lines_only && !last_complete && !lines.empty()) lines.pop_back();  // still being written
  MetricsLog log;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    StepRecord r;
    CheckpointEvent e;
    std::string why;
    switch (parse_metric_line(lines[i], &r, &e, &why)) {
      case LineKind::kStep: log.steps.push_back(std::move(r)); break;
      case LineKind::kCheckpoint:
        e.path = resolve_announced_path(e.path, checkpoint_dir);
        log.checkpoints.push_back(std::move(e));
        break;
      case LineKind::kOtherEvent: break;
      case LineKind::kMalformed:
        if (i + 1 == lines.size() && !complete_lines_only) return log;  // torn tail of a killed writer
        return Status::corruption(path + ": line " + std::to_string(i + 1) + ": " + quoted_line(lines[i]) +
                                  ": " + why +
                                  "; expected {\"step\": int, \"loss\": number, ...} or a checkpoint event");
    }
  }
  return log;
}

Result<std::vector<StepRecord>> read_step_metrics(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(MetricsLog log, read_metrics_log(path));
  return std::move(log.steps);
}

std::vector<SeriesDiff> compare_step_metrics(const std::vector<StepRecord>& reference,
                                             const std::vector<StepRecord>& resumed,
                                             const Tolerance& tolerance) {
  std::map<int64_t, const StepRecord*> by_step;
  std::set<std::string> fields;
  for (const auto& r : reference) {
    by_step[r.step] = &r;
    for (const auto& [name, value] : r.values) fields.insert(name);
  }
  std::vector<std::string> ordered = {"loss"};
  ordered.insert(ordered.end(), fields.begin(), fields.end());
  // nullopt: the record lacks the field.
  auto field_of = [](const StepRecord& r, const std::string& name) -> std::optional<double> {
    if (name == "loss") return r.loss;
    auto it = r.values.find(name);
    return it == r.values.end() ? std::nullopt : std::optional<double>(it->second);
  };
  std::vector<SeriesDiff> diffs;
  for (const auto& field : ordered) {
    SeriesDiff d;
    d.field = field;
    for (const auto& got : resumed) {
      auto it = by_step.find(got.step);
      if (it == by_step.end()) {
        d.missing_steps.push_back(got.step);
        d.passed = false;
        continue;
      }
      const std::optional<double> want = field_of(*it->second, field);
      if (!want) continue;  // the reference did not log it at this step
      const std::optional<double> have = field_of(got, field);
      if (!have) {
        d.missing_field.push_back(got.step);
        d.passed = false;
        continue;
      }
      ++d.steps_compared;
      if (std::memcmp(&*want, &*have, sizeof(double)) != 0) d.bit_identical = false;
      raise_to(&d.max_abs, abs_diff(*want, *have));
      raise_to(&d.max_rel, relative_difference(*want, *have));
      if (!within_tolerance(*want, *have, tolerance) && d.first_diverging_step < 0) {
        d.first_diverging_step = got.step;
        d.reference_at_first = *want;
        d.resumed_at_first = *have;
        d.passed = false;
      }
    }
    diffs.push_back(d);
  }
  return diffs;
}

std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] <= 0) return index;
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

std::string format_number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", value);
  return buf;
}

std::string layout_mismatch(const TensorView& reference, const TensorView& resumed) {
  if (reference.dtype != resumed.dtype)
    return std::string("dtype ") + dtype_name(reference.dtype) + " vs " + dtype_name(resumed.dtype);
  if (reference.shape != resumed.shape)
    return "shape " + shape_to_string(reference.shape) + " vs " + shape_to_string(resumed.shape);
  return "";
}

TensorDiff identical_tensor_diff(const std::string& name, const std::string& component, DType dtype,
                                 int64_t elements) {
  TensorDiff d;
  d.name = name;
  d.component = component;
  d.elements = elements;
  d.bytes = dtype == DType::kU8;
  return d;
}

TensorDiff compare_tensor(const TensorView& reference, const TensorView& resumed,
                          const Tolerance& tolerance) {
  TensorDiff d;
  d.name = reference.name;
  d.component = reference.component;
  d.mismatch = layout_mismatch(reference, resumed);
  if (!d.mismatch.empty()) {
    d.comparable = false;
    return d;
  }
  const auto bytes = checked_nbytes(reference.shape, reference.dtype);
  if (!bytes || *bytes != reference.bytes || *bytes != resumed.bytes) {
    d.mismatch = "byte size does not match shape " + shape_to_string(reference.shape);
    d.comparable = false;
    return d;
  }
  const size_t size = dtype_size(reference.dtype);
  const bool exact_only = !dtype_is_floating(reference.dtype);
  const bool exact_bits = tolerance.atol == 0 && tolerance.rtol == 0;
  d.elements = static_cast<int64_t>(*bytes / size);
  // Most tensors a drill or diff compares are bit-identical: one comparison of the whole buffer
  // settles those, where the loop below makes a call per element.
  if (*bytes == 0 || std::memcmp(reference.data, resumed.data, static_cast<size_t>(*bytes)) == 0)
    return identical_tensor_diff(d.name, d.component, reference.dtype, d.elements);
  d.bytes = reference.dtype == DType::kU8;
  int64_t worst = -1;
  for (int64_t i = 0; i < d.elements; ++i) {
    const uint8_t* a = reference.data + i * size;
    const uint8_t* b = resumed.data + i * size;
    if (std::memcmp(a, b, size) == 0) continue;
    if (d.differing_elements++ == 0) d.first_differing_element = i;
    const double want = element_as_double(a, reference.dtype);
    const double have = element_as_double(b, reference.dtype);
    // Distinct I64 values beyond 2^53 can widen to the same double: 1 is then a true lower bound.
    const double diff = exact_only && want == have ? 1 : abs_diff(want, have);
    // At zero tolerance (diff's default, a drill's bit-exact) any other bits exceed it: 0.0 and -0.0,
    // or two NaNs of other payloads, are equal numbers but not the same tensor.
    if (exact_only || exact_bits || !within_tolerance(want, have, tolerance)) ++d.exceeding_elements;
    if (worst < 0 || (!std::isnan(d.max_abs) && (std::isnan(diff) || diff > d.max_abs))) {
      d.max_abs = diff;
      worst = i;
    }
    raise_to(&d.max_rel, relative_difference(want, have));
  }
  if (worst >= 0) d.max_abs_index = unravel_index(worst, reference.shape);
  return d;
}

TensorDiff one_side_only(const std::string& name, const std::string& component, bool in_reference) {
  TensorDiff d;
  d.name = name;
  d.component = component;
  d.mismatch = std::string(in_reference ? kMissingInTheResumedRun : kOnlyInTheResumedRun);
  d.comparable = false;
  return d;
}

void ComponentDiff::add(const TensorDiff& d) {
  component = d.component;
  ++tensors;
  elements += d.elements;
  raise_to(&max_abs, d.max_abs);
  raise_to(&max_rel, d.max_rel);
  if (!d.bit_identical()) bit_identical = false;
  if (!d.comparable) ++incomparable;
  if (!d.passed() && passed) {
    passed = false;
    first_diverging_tensor = d.name;
    first_mismatch = d.mismatch;
    first_max_abs = d.max_abs;
    first_index = d.max_abs_index;
    first_elements = d.elements;
    first_differing_byte = d.bytes ? d.first_differing_element : -1;
  }
}

std::string ComponentDiff::divergence_message() const {
  if (passed) return "";
  std::string m = component + " diverged: " + first_diverging_tensor;
  if (!first_mismatch.empty()) return m + " " + first_mismatch;
  if (first_differing_byte >= 0) {
    // A byte state's "max abs 251" says nothing; where it first differs does.
    const bool rng =
        component.find("rng") != std::string::npos || first_diverging_tensor.find("rng") != std::string::npos;
    return m + ": " + (rng ? "RNG state" : "bytes") + " differs (byte " +
           std::to_string(first_differing_byte) + " of " + std::to_string(first_elements) + ")";
  }
  return m + " max abs " + format_number(first_max_abs) + " at " + shape_to_string(first_index);
}

namespace {
// JSON has no inf/nan; nlohmann writes them as null, which readers can't tell from "absent".
nlohmann::json number_json(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}
}  // namespace

nlohmann::json to_json(const SeriesDiff& d) {
  nlohmann::json j = {{"field", d.field},
                      {"steps_compared", d.steps_compared},
                      {"max_abs", number_json(d.max_abs)},
                      {"max_rel", number_json(d.max_rel)},
                      {"bit_identical", d.bit_identical},
                      {"passed", d.passed},
                      {"missing_steps", d.missing_steps}};
  if (!d.missing_field.empty()) j["missing_field_at_steps"] = d.missing_field;
  if (d.first_diverging_step >= 0) {
    j["first_diverging_step"] = d.first_diverging_step;
    j["reference_at_first"] = number_json(d.reference_at_first);
    j["resumed_at_first"] = number_json(d.resumed_at_first);
  }
  return j;
}

nlohmann::json to_json(const TensorDiff& d) {
  return {{"tensor", d.name},
          {"component", d.component},
          {"mismatch", d.mismatch},
          {"elements", d.elements},
          {"differing_elements", d.differing_elements},
          {"exceeding_elements", d.exceeding_elements},
          {"max_abs", number_json(d.max_abs)},
          {"max_rel", number_json(d.max_rel)},
          {"max_abs_index", d.max_abs_index},
          {"bit_identical", d.bit_identical()},
          {"passed", d.passed()}};
}

nlohmann::json to_json(const ComponentDiff& d) {
  nlohmann::json j = {{"tensors", d.tensors},
                      {"elements", d.elements},
                      {"max_abs", number_json(d.max_abs)},
                      {"max_rel", number_json(d.max_rel)},
                      {"bit_identical", d.bit_identical},
                      {"passed", d.passed},
                      {"first_diverging", nullptr}};
  if (!d.passed) {
    j["first_diverging"] = {{"tensor", d.first_diverging_tensor},
                            {"mismatch", d.first_mismatch},
                            {"max_abs", number_json(d.first_max_abs)},
                            {"index", d.first_index}};
    if (d.first_differing_byte >= 0) j["first_diverging"]["byte"] = d.first_differing_byte;
    j["message"] = d.divergence_message();
  }
  if (!d.rule.empty()) j["rule"] = d.rule;
  if (!d.note.empty()) j["note"] = d.note;
  return j;
}

}  // namespace ckpt

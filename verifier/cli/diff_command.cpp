// `ckptcheck diff A B [--rtol R] [--atol A] [--json]`: compares two tensor sources (checkpoints,
// roots, tensor files of any format, HF indexes) tensor by tensor, whatever their formats and
// shardings, with drill_compare's rule. Tensors are read one pair at a time, so memory is bounded
// by the largest tensor. Exit 0: identical within tolerance; 1: a tensor differs or exists on one
// side only (or a side's bytes are damaged); 2: bad flags or an unreadable source.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "verifier/cli/commands.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {
namespace {

// The first element that is not bit-identical, or empty: where a reader starts looking.
std::vector<int64_t> first_differing_index(const LoadedTensor& a, const LoadedTensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size()) return {};
  const size_t size = dtype_size(a.dtype);
  for (size_t i = 0; i * size < a.bytes.size(); ++i) {
    if (std::memcmp(a.bytes.data() + i * size, b.bytes.data() + i * size, size) != 0) {
      return unravel_index(static_cast<int64_t>(i), a.shape);
    }
  }
  return {};
}

struct TensorRow {
  TensorDiff diff;
  std::vector<int64_t> first_index;
};

struct ComponentRows {
  ComponentDiff summary;
  std::vector<TensorRow> rows;
};

// Folds one tensor into its component's summary the way compare_states does.
void add_to_component(ComponentRows& c, const TensorRow& row) {
  c.summary.add(row.diff);
  c.rows.push_back(row);
}

class DiffCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("diff", "Compare two checkpoints or tensor files tensor by tensor");
    sub->add_option("a", path_a_, "checkpoint dir or root, tensor file or safetensors index")->required();
    sub->add_option("b", path_b_, "checkpoint dir or root, tensor file or safetensors index")->required();
    sub->add_option("--rtol", tolerance_.rtol, "relative tolerance (floating tensors)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--atol", tolerance_.atol, "absolute tolerance (floating tensors)")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--json", json_, "print one JSON object instead of the table");
    return sub;
  }

  int run() override {
    auto a = TensorSource::open(path_a_);
    if (!a.is_ok()) return fail(a.status());
    auto b = TensorSource::open(path_b_);
    if (!b.is_ok()) return fail(b.status());
    std::set<std::string> names;
    for (const auto& t : a->tensors()) names.insert(t.name);
    for (const auto& t : b->tensors()) names.insert(t.name);
    std::map<std::string, ComponentRows> components;
    bool same = true;
    for (const auto& name : names) {
      auto row = compare_one(*a, *b, name);
      if (!row.is_ok()) return fail(row.status());
      same = same && row->diff.passed();
      add_to_component(components[row->diff.component], *row);
    }
    const std::string out =
        json_ ? to_json_text(*a, *b, components, same) : to_table(*a, *b, components, same);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return same ? kExitOk : kExitCheckFailed;
  }

 private:
  Result<TensorRow> compare_one(const TensorSource& a, const TensorSource& b, const std::string& name) const {
    const SourceTensor* ta = a.find(name);
    const SourceTensor* tb = b.find(name);
    TensorRow row;
    if (!ta || !tb) {
      row.diff.name = name;
      row.diff.component = (ta ? ta : tb)->component;
      row.diff.mismatch = ta ? "only in A" : "only in B";
      return row;
    }
    CKPT_ASSIGN_OR_RETURN(LoadedTensor la, a.read_tensor(*ta));
    CKPT_ASSIGN_OR_RETURN(LoadedTensor lb, b.read_tensor(*tb));
    row.diff = compare_tensor(la.view(), lb.view(), tolerance_);
    row.first_index = first_differing_index(la, lb);
    return row;
  }

  static int fail(const Status& status) { return report_failure("diff", status); }

  std::string to_json_text(const TensorSource& a, const TensorSource& b,
                           const std::map<std::string, ComponentRows>& components, bool same) const {
    nlohmann::json comps = nlohmann::json::object();
    for (const auto& [name, c] : components) {
      nlohmann::json j = to_json(c.summary);
      j["tensors_differing"] = nlohmann::json::array();
      for (const auto& row : c.rows) {
        if (row.diff.bit_identical()) continue;
        nlohmann::json t = to_json(row.diff);
        t["first_index"] = row.first_index;
        j["tensors_differing"].push_back(std::move(t));
      }
      comps[name] = std::move(j);
    }
    nlohmann::json j = {{"a", a.path()},           {"b", b.path()},     {"rtol", tolerance_.rtol},
                        {"atol", tolerance_.atol}, {"identical", same}, {"components", comps}};
    return j.dump() + "\n";
  }

  std::string to_table(const TensorSource& a, const TensorSource& b,
                       const std::map<std::string, ComponentRows>& components, bool same) const {
    std::string out = std::string(same ? "SAME " : "DIFF ") + a.path() + " vs " + b.path() + "\n";
    for (const auto& [name, c] : components) {
      const ComponentDiff& s = c.summary;
      out += name + ": " + std::to_string(s.tensors) + " tensors, max abs " + format_number(s.max_abs) +
             ", max rel " + format_number(s.max_rel) + ", " +
             (s.bit_identical ? "bit-identical"
              : s.passed      ? "within tolerance"
                              : "differs") +
             "\n";
      for (const auto& row : c.rows) {
        const TensorDiff& d = row.diff;
        if (d.bit_identical()) continue;
        if (!d.mismatch.empty()) {
          out += "  " + d.name + ": " + d.mismatch + "\n";
          continue;
        }
        out += "  " + d.name + ": " + std::to_string(d.differing_elements) + " of " +
               std::to_string(d.elements) + " elements differ, max abs " + format_number(d.max_abs) + " at " +
               shape_to_string(d.max_abs_index) + ", max rel " + format_number(d.max_rel) + ", first at " +
               shape_to_string(row.first_index) + (d.passed() ? " (within tolerance)" : "") + "\n";
      }
    }
    return out;
  }

  std::string path_a_;
  std::string path_b_;
  Tolerance tolerance_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> make_diff_command() {
  return std::make_unique<DiffCommand>();
}

}  // namespace ckpt

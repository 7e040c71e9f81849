// `ckptcheck inspect PATH [--json] [--stats] [--tensor NAME]`: what a checkpoint or tensor file holds
// (tensors, their chunks and hashes, the file's metadata, every global a pickle names and its risk),
// with every chunk's bytes re-hashed against the hashes recorded for it and a torch.save zip's
// member CRC-32s checked. Exit 0: all agree; 1: the bytes are damaged (a hash or CRC mismatch, a
// corrupt or torn file); 2: bad flags, unreadable path, unknown tensor, or a file we cannot read.
// A pickle's globals are never imported or called; dangerous ones get a WARNING line. Datasets a
// file holds but its reader cannot read (compressed HDF5, ...) get an "unsupported" line each.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "base/parallel_jobs.h"
#include "verifier/cli/commands.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/tensor_source.h"
#include "verifier/tensors/tensor_stats.h"

namespace ckpt {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Up to three tensor names a mistyped one was probably meant to be, closest first.
std::vector<std::string> close_names(const std::string& wanted, const std::vector<SourceTensor>& tensors) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& t : tensors) {
    const size_t d = edit_distance(wanted, t.name);
    const bool contains =
        t.name.find(wanted) != std::string::npos || wanted.find(t.name) != std::string::npos;
    if (d <= std::max<size_t>(3, wanted.size() / 3) || contains)
      scored.emplace_back(contains ? 0 : d, t.name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) names.push_back(scored[i].second);
  return names;
}

struct TensorReport {
  const SourceTensor* tensor = nullptr;
  std::vector<ChunkCheck> chunks;
  TensorStats stats;
};

class InspectCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("inspect", "List the tensors, hashes and metadata of a checkpoint or tensor file");
    sub->add_option("path", path_,
                    "checkpoint dir or root, tensor file (native, safetensors, HDF5, .pt) or "
                    "model.safetensors.index.json")
        ->required();
    sub->add_flag("--json", json_, "print one JSON object instead of the table");
    sub->add_flag("--stats", stats_, "add min, max, mean, L2 norm and NaN/Inf counts per tensor");
    sub->add_option("--tensor", tensor_, "inspect only this tensor");
    return sub;
  }

  int run() override {
    auto source = TensorSource::open(path_);
    if (!source.is_ok()) return fail(source.status());
    std::vector<const SourceTensor*> selected;
    if (!tensor_.empty()) {
      const SourceTensor* t = source->find(tensor_);
      if (!t) return unknown_tensor(*source);
      selected.push_back(t);
    } else {
      for (const auto& t : source->tensors()) selected.push_back(&t);
    }
    std::vector<TensorReport> reports;
    std::vector<std::string> errors;
    std::vector<std::string> container_errors;  // a torch.save zip member whose CRC-32 disagrees
    for (const auto& f : source->files()) {
      const Status st = f->check_container();
      if (!st.is_ok()) container_errors.push_back(st.message());
    }
    // Tensors are independent: each streams its own chunks (pread, thread-safe) on its own core. An
    // alias (a second name of one tensor object) reuses its target's hashes when the target is read
    // too, so tied weights are hashed once.
    std::vector<Result<TensorReport>> results(selected.size(), Status::io_error("not inspected"));
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < selected.size(); ++i) index_of[selected[i]->name] = i;
    const auto reads_target = [&](size_t i) {
      return !selected[i]->alias_of.empty() && index_of.count(selected[i]->alias_of) != 0;
    };
    run_parallel(selected.size(), resolve_jobs(0, selected.size()), [&](size_t i) {
      if (!reads_target(i)) results[i] = inspect_tensor(*source, *selected[i]);
    });
    for (size_t i = 0; i < selected.size(); ++i) {
      if (!reads_target(i)) continue;
      results[i] = results[index_of[selected[i]->alias_of]];
      if (results[i].is_ok()) results[i]->tensor = selected[i];
    }
    for (auto& report : results) {
      if (!report.is_ok()) return fail(report.status());
      for (const auto& c : report->chunks) {
        if (!c.ok()) errors.push_back(c.mismatch_message());
      }
      reports.push_back(std::move(*report));
    }
    const std::string out = json_ ? to_json_text(*source, reports, errors, container_errors)
                                  : to_table(*source, reports, errors, container_errors);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return errors.empty() && container_errors.empty() ? kExitOk : kExitCheckFailed;
  }

 private:
  Result<TensorReport> inspect_tensor(const TensorSource& source, const SourceTensor& t) const {
    TensorReport report;
    report.tensor = &t;
    TensorStatsAccumulator accumulator(t.dtype);
    std::function<void(const uint8_t*, size_t)> sink;
    if (stats_) sink = [&](const uint8_t* p, size_t n) { accumulator.feed(p, n); };
    for (size_t i = 0; i < t.chunks.size(); ++i) {
      CKPT_ASSIGN_OR_RETURN(ChunkCheck check, source.stream_chunk(t, i, sink));
      report.chunks.push_back(std::move(check));
    }
    report.stats = accumulator.stats();
    return report;
  }

  static int fail(const Status& status) { return report_failure("inspect", status); }

  int unknown_tensor(const TensorSource& source) const {
    std::string message = source.path() + ": no tensor named '" + tensor_ + "'";
    const auto suggestions = close_names(tensor_, source.tensors());
    for (size_t i = 0; i < suggestions.size(); ++i)
      message += (i ? ", " : "; did you mean: ") + suggestions[i];
    std::fprintf(stderr, "ckptcheck inspect: %s\n", message.c_str());
    return kExitUsage;
  }

  // Every global the files' pickles name, with what torch.load(weights_only=False) would do with it.
  static nlohmann::json globals_json(const TensorSource& source) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : source.files()) {
      for (const PickleGlobal& g : f->pickle_globals()) {
        out.push_back({{"file", f->path()},
                       {"name", g.name},
                       {"risk", pickle_global_risk_name(g.risk)},
                       {"count", g.count},
                       {"first_offset", g.first_offset}});
      }
    }
    return out;
  }

  static std::string globals_lines(const TensorSource& source) {
    std::string out;
    for (const auto& f : source.files()) {
      const auto& globals = f->pickle_globals();
      if (globals.empty()) continue;
      out += "pickle globals (" + f->path() + "; none was imported or called):\n";
      for (const PickleGlobal& g : globals) {
        out += "  " + std::string(pickle_global_risk_name(g.risk)) +
               std::string(10 - std::strlen(pickle_global_risk_name(g.risk)), ' ') + g.name + " (x" +
               std::to_string(g.count) + ")\n";
      }
      for (const PickleGlobal& g : globals) {
        if (g.risk == PickleGlobalRisk::kDangerous) {
          out +=
              "WARNING: " + f->path() + " names dangerous global '" + g.name +
              "': torch.load(weights_only=False) would run it; load this file only with weights_only=True\n";
        }
      }
    }
    return out;
  }

  std::string to_json_text(const TensorSource& source, const std::vector<TensorReport>& reports,
                           const std::vector<std::string>& errors,
                           const std::vector<std::string>& container_errors) const {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& r : reports) {
      nlohmann::json chunks = nlohmann::json::array();
      for (const auto& c : r.chunks) {
        chunks.push_back({{"label", c.label},
                          {"file", c.file},
                          {"sha256", c.computed},
                          {"stored_sha256", c.stored},
                          {"ok", c.ok()}});
      }
      nlohmann::json t = {{"name", r.tensor->name},
                          {"component", r.tensor->component},
                          {"dtype", dtype_name(r.tensor->dtype)},
                          {"shape", r.tensor->shape},
                          {"bytes", r.tensor->bytes},
                          {"chunks", chunks}};
      if (!r.tensor->alias_of.empty()) t["alias_of"] = r.tensor->alias_of;
      if (r.chunks.size() == 1) t["sha256"] = r.chunks[0].computed;
      if (stats_) t["stats"] = to_json(r.stats);
      tensors.push_back(std::move(t));
    }
    std::vector<std::string> all_errors = container_errors;
    all_errors.insert(all_errors.end(), errors.begin(), errors.end());
    nlohmann::json j = {{"path", source.path()},
                        {"kind", source.kind()},
                        {"metadata", source.metadata()},
                        {"pickle_globals", globals_json(source)},
                        {"tensors", tensors},
                        {"errors", all_errors},
                        {"ok", all_errors.empty()}};
    return j.dump() + "\n";
  }

  std::string to_table(const TensorSource& source, const std::vector<TensorReport>& reports,
                       const std::vector<std::string>& errors,
                       const std::vector<std::string>& container_errors) const {
    const bool ok = errors.empty() && container_errors.empty();
    std::string out = (ok ? "OK " : "FAIL ") + source.path() + " (" + source.kind() + ", " +
                      std::to_string(source.tensors().size()) + " tensors, " +
                      std::to_string(source.files().size()) + " files)\n";
    out += metadata_lines(source);
    out += unsupported_lines(source);
    out += globals_lines(source);
    for (const auto& r : reports) {
      const SourceTensor& t = *r.tensor;
      const std::string hash =
          r.chunks.size() == 1 ? r.chunks[0].computed : std::to_string(r.chunks.size()) + " chunks";
      char line[512];
      std::snprintf(line, sizeof(line), "%-44s %-10s %-5s %-14s %10llu  %s\n", t.name.c_str(),
                    t.component.c_str(), dtype_name(t.dtype), shape_to_string(t.shape).c_str(),
                    static_cast<unsigned long long>(t.bytes), hash.c_str());
      out += line;
      if (!t.alias_of.empty()) out += "    alias of " + t.alias_of + " (one tensor object: same bytes)\n";
      if (stats_) out += stats_line(r.stats);
    }
    for (const auto& e : container_errors) out += "  [container_corrupt] " + e + "\n";
    for (const auto& e : errors) out += "  [sha256_mismatch] " + e + "\n";
    return out;
  }

  static std::string metadata_lines(const TensorSource& source) {
    const nlohmann::json& m = source.metadata();
    if (!source.manifest()) return "metadata: " + m.dump() + "\n";
    std::string out = "step " + m["step"].dump() + ", created " + m["created_utc"].get<std::string>() +
                      ", world size " + m["world_size"].dump() + ", strategy " +
                      m["strategy"].get<std::string>() + ", " + std::to_string(m["shards"].size()) +
                      " shards\n";
    if (!m["pins"].empty()) out += "pins: " + m["pins"].dump() + "\n";
    if (!m["extra"].empty()) out += "extra: " + m["extra"].dump() + "\n";
    for (const auto& s : m["shards"]) {
      out += "shard " + s["path"].get<std::string>() + " " + s["format"].get<std::string>() + " " +
             s["bytes"].dump() + " bytes rank " + s["rank"].dump() + "\n";
    }
    return out;
  }

  // Datasets a file holds but its reader cannot read (a compressed HDF5 dataset, ...): named, with why.
  static std::string unsupported_lines(const TensorSource& source) {
    std::string out;
    const auto text = [](const nlohmann::json& u, const char* key) {
      const auto it = u.find(key);
      if (it == u.end()) return std::string();
      return it->is_string() ? it->get<std::string>()
                             : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    for (const auto& f : source.files()) {
      if (std::strcmp(f->format_name(), "hdf5") != 0) continue;
      const auto list = f->metadata().find("unsupported_datasets");
      if (list == f->metadata().end() || !list->is_array()) continue;
      for (const auto& u : *list) {
        if (!u.is_object()) continue;
        out += "unsupported " + text(u, "path") + " " + text(u, "type") + " " + text(u, "shape") + ": " +
               text(u, "reason") + "\n";
      }
    }
    return out;
  }

  static std::string stats_line(const TensorStats& s) {
    return "    min " + format_number(s.min) + " max " + format_number(s.max) + " mean " +
           format_number(s.mean()) + " l2 " + format_number(s.l2_norm()) + " nan " + std::to_string(s.nan) +
           " inf " + std::to_string(s.inf) + "\n";
  }

  std::string path_;
  bool json_ = false;
  bool stats_ = false;
  std::string tensor_;
};

}  // namespace

std::unique_ptr<Command> make_inspect_command() {
  return std::make_unique<InspectCommand>();
}

}  // namespace ckpt

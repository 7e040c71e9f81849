#include "verifier/tensors/inspect_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "base/close_names.h"
#include "base/file_io.h"
#include "base/parallel_jobs.h"
#include "base/text.h"
#include "distributed/share_exchange.h"
#include "distributed/share_split.h"
#include "verifier/tensors/integrity_codes.h"

namespace ckpt {

namespace {

// Up to three tensor names a mistyped one was probably meant to be, closest first.
std::vector<std::string> close_tensor_names(const std::string& wanted,
                                            const std::vector<SourceTensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  return close_names(wanted, names);
}

Result<InspectedTensor> inspect_tensor(const TensorSource& source, const SourceTensor& t, bool stats,
                                       const ScannedChunkDigests& scanned) {
  InspectedTensor report;
  report.tensor = &t;
  report.read = &t;
  TensorStatsAccumulator accumulator(t.dtype);
  std::function<void(const uint8_t*, size_t)> sink;
  if (stats) sink = [&](const uint8_t* p, size_t n) { accumulator.feed(p, n); };
  report.chunk_sha256.reserve(t.chunks.size());
  for (size_t i = 0; i < t.chunks.size(); ++i) {
    const SourceChunk& sc = t.chunks[i];
    if (!stats && scanned[sc.file]) {
      report.chunk_sha256.push_back((*scanned[sc.file])[sc.index]);
      continue;
    }
    CKPT_ASSIGN_OR_RETURN(const Sha256Digest computed, source.hash_chunk(t, i, sink));
    report.chunk_sha256.push_back(computed);
  }
  report.stats = accumulator.stats();
  return report;
}

// A long double exactly, as a hex float ("%La"): the sums behind mean and L2 norm must come back
// bit for bit, or a distributed inspect would print other last digits than a single one.
std::string exact(long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%La", v);
  return buf;
}

// One tensor's result as the task that read it sends it (inspect --distributed).
nlohmann::json inspected_to_json(const InspectedTensor& t) {
  nlohmann::json chunks = nlohmann::json::array();
  for (const Sha256Digest& d : t.chunk_sha256) chunks.push_back(digest_hex(d));
  const TensorStats& s = t.stats;
  return {
      {"chunks", std::move(chunks)},
      {"stats",
       {s.elements, s.finite, s.nan, s.inf, exact(s.min), exact(s.max), exact(s.sum), exact(s.sum_squares)}}};
}

// `read`: the tensor the sending task read, whose chunks the digests are of.
Result<InspectedTensor> inspected_from_json(const nlohmann::json& j, const SourceTensor& read) {
  InspectedTensor t;
  t.read = &read;
  try {
    for (const auto& c : j.at("chunks")) {
      const std::optional<Sha256Digest> digest = digest_from_hex(c.get<std::string>());
      if (!digest) return Status::corruption("a task's inspect result has a malformed chunk digest");
      t.chunk_sha256.push_back(*digest);
    }
    if (t.chunk_sha256.size() != read.chunks.size())
      return Status::corruption("a task's inspect result has " + std::to_string(t.chunk_sha256.size()) +
                                " chunk digests for " + read.name + ", which has " +
                                std::to_string(read.chunks.size()));
    const auto& s = j.at("stats");
    t.stats.elements = s.at(0).get<uint64_t>();
    t.stats.finite = s.at(1).get<uint64_t>();
    t.stats.nan = s.at(2).get<uint64_t>();
    t.stats.inf = s.at(3).get<uint64_t>();
    t.stats.min = static_cast<double>(std::strtold(s.at(4).get<std::string>().c_str(), nullptr));
    t.stats.max = static_cast<double>(std::strtold(s.at(5).get<std::string>().c_str(), nullptr));
    t.stats.sum = std::strtold(s.at(6).get<std::string>().c_str(), nullptr);
    t.stats.sum_squares = std::strtold(s.at(7).get<std::string>().c_str(), nullptr);
  } catch (const nlohmann::json::exception& e) {
    return Status::corruption(std::string("a task's inspect result is malformed: ") + e.what());
  }
  return t;
}

// Every global the files' pickles name, with what torch.load(weights_only=False) would do with it.
nlohmann::json globals_json(const TensorSource& source) {
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

std::string globals_lines(const TensorSource& source) {
  std::string out;
  for (const auto& f : source.files()) {
    // Keras code in an HDF5 model's configs (formats/keras_config.h): a risk like a dangerous global.
    const auto keras = f->metadata().find("keras_code");
    if (keras != f->metadata().end() && keras->is_array()) {
      for (const auto& k : *keras) {
        out += "WARNING: " + f->path() + " layer '" + k.value("layer", std::string()) + "' (" +
               k.value("class_name", std::string()) + ") in " + k.value("attribute", std::string()) + ": " +
               k.value("reason", std::string()) + "; keras.models.load_model would run it\n";
      }
    }
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
        out += "WARNING: " + f->path() + " names dangerous global '" + g.name +
               "': torch.load(weights_only=False) would run it; load this file only with weights_only=True\n";
      }
    }
  }
  return out;
}

// What a finding names as its file: the path inside the inspected checkpoint dir, as verify names
// a shard; a single file by its own name.
std::string file_label(const TensorSource& source, const std::string& file) {
  if (file == source.path()) return base_name(file);
  const std::string dir = source.path() + "/";
  return starts_with(file, dir) ? file.substr(dir.size()) : file;
}

// "[code] file tensor: message", as verify prints a finding (verifier/check/verify_report.h).
std::string issue_text(const InspectIssue& i) {
  std::string line = "[" + i.code + "]";
  if (!i.file.empty()) line += " " + i.file;
  if (!i.tensor.empty()) line += " " + i.tensor;
  return line + ": " + i.message;
}

// The pins on one readable line: each pin by name, digests shortened, groups by their size;
// `inspect --json` has them whole.
std::string pins_summary(const nlohmann::json& pins) {
  const auto short_text = [](const std::string& text) {
    return text.size() > 16 ? text.substr(0, 12) + "…" : text;
  };
  std::string out;
  for (const auto& [key, value] : pins.items()) {
    std::string item = key;
    if (value.is_string()) {
      item += " " + short_text(value.get<std::string>());
    } else if (value.is_object() && value.contains("sha256") && value["sha256"].is_string()) {
      item += " " + short_text(value["sha256"].get<std::string>());
    } else if (value.is_object() || value.is_array()) {
      item += " (" + std::to_string(value.size()) + (value.size() == 1 ? " entry)" : " entries)");
    } else {
      item += " " + short_text(value.dump());
    }
    out += (out.empty() ? "" : ", ") + item;
  }
  return out + " (whole: --json)";
}

// `v` with each array cut to its first kMetadataItemsShown items and each nested object to its first
// kMetadataKeysShown keys, what was cut counted where it was ("... 19,995 more"): a DCP directory
// of 20,000 files or a planner_data of 62,500 tensors is otherwise one line of megabytes on the
// terminal. The top level keeps every key; `inspect --json` has it all.
constexpr size_t kMetadataItemsShown = 8;
constexpr size_t kMetadataKeysShown = 16;
nlohmann::json abridged(const nlohmann::json& v, bool top, bool* cut) {
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < v.size() && i < kMetadataItemsShown; ++i)
      out.push_back(abridged(v[i], false, cut));
    if (v.size() > kMetadataItemsShown) {
      *cut = true;
      out.push_back("... " + std::to_string(v.size() - kMetadataItemsShown) + " more");
    }
    return out;
  }
  if (!v.is_object()) return v;
  nlohmann::json out = nlohmann::json::object();
  size_t shown = 0;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!top && shown == kMetadataKeysShown) {
      *cut = true;
      out["..."] = std::to_string(v.size() - kMetadataKeysShown) + " more keys";
      break;
    }
    out[it.key()] = abridged(it.value(), false, cut);
    ++shown;
  }
  return out;
}

static std::string metadata_lines(const TensorSource& source) {
  const nlohmann::json& m = source.metadata();
  if (!source.manifest()) {
    bool cut = false;
    const std::string line =
        abridged(m, true, &cut).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return "metadata: " + line + (cut ? " (abridged; `inspect --json` has it whole)" : "") + "\n";
  }
  std::string out = "step " + m["step"].dump() + ", created " + m["created_utc"].get<std::string>() +
                    ", world size " + m["world_size"].dump() + ", strategy " +
                    m["strategy"].get<std::string>() + ", " + std::to_string(m["shards"].size()) +
                    " shards\n";
  if (!m["pins"].empty()) out += "pins: " + pins_summary(m["pins"]) + "\n";
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
  const std::string counts = " nan " + std::to_string(s.nan) + " inf " + std::to_string(s.inf) + "\n";
  if (s.finite == 0)  // min, max, mean and L2 are of the finite elements: none, nothing measured
    return "    min, max, mean, l2 not measured (no finite element of " + std::to_string(s.elements) + ")" +
           counts;
  return "    min " + format_number(s.min) + " max " + format_number(s.max) + " mean " +
         format_number(s.mean()) + " l2 " + format_number(s.l2_norm()) + counts;
}

}  // namespace

Result<InspectReport> inspect_checkpoint(const std::string& path, const InspectOptions& options) {
  CKPT_ASSIGN_OR_RETURN(TensorSource source, TensorSource::open(path));
  InspectReport out{std::move(source), options.stats, {}, {}, {}, {}};
  const TensorSource& src = out.source;
  // The layout's findings first, with verify's code, severity and words.
  for (const SourceFinding& f : src.findings())
    (f.error ? out.issues : out.warnings).push_back({f.code, f.file, f.tensor, f.message});
  std::vector<const SourceTensor*> selected;
  if (!options.tensor.empty()) {
    const SourceTensor* t = src.find(options.tensor);
    if (!t) {
      std::string message = src.path() + ": no tensor named '" + options.tensor + "'";
      const auto suggestions = close_tensor_names(options.tensor, src.tensors());
      for (size_t i = 0; i < suggestions.size(); ++i)
        message += (i ? ", " : "; did you mean: ") + suggestions[i];
      return Status::not_found(message);
    }
    selected.push_back(t);
  } else {
    for (const auto& t : src.tensors()) selected.push_back(&t);
  }
  for (size_t fi = 0; fi < src.files().size(); ++fi) {
    const auto& f = src.files()[fi];
    const Status st = f->check_container();
    if (st.is_ok()) continue;
    // The tensors stored in the damaged members: named in the finding, their rows marked.
    const std::vector<size_t> damaged = chunks_in_damaged_members(*f);
    std::vector<std::string> hit;
    for (const SourceTensor& t : src.tensors()) {
      for (const SourceChunk& c : t.chunks) {
        if (c.file == fi && std::binary_search(damaged.begin(), damaged.end(), c.index) &&
            out.damaged_tensors.insert(t.name).second)
          hit.push_back(t.name);
      }
    }
    out.issues.push_back({container_issue_code(st), file_label(src, f->path()), damaged_tensor_list(hit),
                          container_finding_message(st.message(), hit)});
  }
  // Tensors are independent: each streams its own chunks (pread, thread-safe) on its own core. An
  // alias (a second name of one tensor object) reuses its target's hashes when the target is read
  // too, so tied weights are hashed once.
  std::vector<Result<InspectedTensor>> results(selected.size(), Status::io_error("not inspected"));
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < selected.size(); ++i) index_of[selected[i]->name] = i;
  const auto reads_target = [&](size_t i) {
    return !selected[i]->alias_of.empty() && index_of.count(selected[i]->alias_of) != 0;
  };
  // Distributed: this task reads its share of the tensors (by bytes, the same split on every task)
  // and takes in every other tensor's hashes and statistics.
  ByteCollective* world =
      options.distributed && options.distributed->world_size() > 1 ? options.distributed : nullptr;
  std::vector<uint64_t> sizes(selected.size(), 0);
  for (size_t i = 0; i < selected.size(); ++i) {
    if (!reads_target(i)) sizes[i] = selected[i]->bytes;  // an alias is read with its target
  }
  const std::vector<int> owners =
      world ? split_by_size(sizes, world->world_size()) : std::vector<int>(selected.size(), 0);
  std::vector<size_t> mine;
  for (size_t i = 0; i < selected.size(); ++i) {
    if (!reads_target(i) && owners[i] == (world ? world->rank() : 0)) mine.push_back(i);
  }
  // Without statistics no tensor needs its bytes, only its chunks' digests: on one task, whole
  // files are scanned for them first. Statistics, or a distributed inspect (split by tensor), read
  // each tensor's chunks as before.
  {
    const ScannedChunkDigests scanned = options.stats || world || !options.tensor.empty()
                                            ? ScannedChunkDigests(src.files().size())
                                            : src.scan_chunk_digests(options.jobs);
    run_parallel(mine.size(), resolve_jobs(options.jobs, mine.size()), [&](size_t k) {
      results[mine[k]] = inspect_tensor(src, *selected[mine[k]], options.stats, scanned);
    });
  }  // the scanned digests are the tensors' now
  if (world) {
    CKPT_RETURN_IF_ERROR(exchange_unit_results(
        *world, "inspect: tensors", sizes, owners,
        [&](size_t i) -> nlohmann::json {
          if (reads_target(i)) return nullptr;
          if (!results[i].is_ok())
            return {static_cast<int>(results[i].status().code()), results[i].status().message()};
          return {0, inspected_to_json(*results[i])};
        },
        [&](size_t i, const nlohmann::json& r) -> Status {
          if (reads_target(i)) return Status::ok();
          const int code = r.at(0).get<int>();
          if (code != 0) {
            results[i] = status_from_code(code, r.at(1).get<std::string>());
            return Status::ok();
          }
          CKPT_ASSIGN_OR_RETURN(InspectedTensor t, inspected_from_json(r.at(1), *selected[i]));
          t.tensor = selected[i];
          results[i] = std::move(t);
          return Status::ok();
        }));
  }
  for (size_t i = 0; i < selected.size(); ++i) {
    if (!reads_target(i)) continue;
    results[i] = results[index_of[selected[i]->alias_of]];
    if (results[i].is_ok()) results[i]->tensor = selected[i];
  }
  for (auto& r : results) {
    if (!r.is_ok()) return r.status();
    for (size_t c = 0; c < r->chunk_sha256.size(); ++c) {
      if (src.chunk_matches(*r->read, c, r->chunk_sha256[c])) continue;
      const ChunkCheck check = src.check_chunk(*r->read, c, r->chunk_sha256[c]);
      out.issues.push_back(
          {verify_code::kChunkSha256Mismatch, file_label(src, check.file), r->tensor->name,
           chunk_sha256_mismatch_message(check.offset, check.label, check.stored, check.computed)});
    }
    out.tensors.push_back(std::move(*r));
  }
  return out;
}

nlohmann::json inspect_report_to_json(const InspectReport& report, bool errors_only) {
  const TensorSource& source = report.source;
  nlohmann::json errors = nlohmann::json::array();
  nlohmann::json issues = nlohmann::json::array();
  for (const InspectIssue& i : report.issues) {
    errors.push_back(issue_text(i));
    issues.push_back({{"code", i.code}, {"file", i.file}, {"tensor", i.tensor}, {"message", i.message}});
  }
  nlohmann::json warnings = nlohmann::json::array();
  for (const InspectIssue& w : report.warnings)
    warnings.push_back({{"code", w.code}, {"file", w.file}, {"tensor", w.tensor}, {"message", w.message}});
  if (errors_only) {
    return {{"path", source.path()},
            {"kind", source.kind()},
            {"errors", errors},
            {"issues", issues},
            {"ok", report.ok()}};
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& r : report.tensors) {
    nlohmann::json chunks = nlohmann::json::array();
    for (size_t i = 0; i < r.chunk_sha256.size(); ++i) {
      const ChunkCheck c = report.chunk_check(r, i);
      chunks.push_back({{"label", c.label},
                        {"file", c.file},
                        {"sha256", c.computed},
                        {"stored_sha256", c.stored},
                        {"ok", c.ok() && !report.damaged_tensors.count(r.tensor->name)}});
    }
    nlohmann::json t = {{"name", r.tensor->name},
                        {"component", r.tensor->component},
                        {"dtype", dtype_name(r.tensor->dtype)},
                        {"shape", r.tensor->shape},
                        {"bytes", r.tensor->bytes},
                        {"chunks", chunks}};
    if (!r.tensor->alias_of.empty()) t["alias_of"] = r.tensor->alias_of;
    if (r.chunk_sha256.size() == 1) t["sha256"] = digest_hex(r.chunk_sha256[0]);
    if (report.with_stats) t["stats"] = to_json(r.stats);
    tensors.push_back(std::move(t));
  }
  nlohmann::json j = {{"path", source.path()},
                      {"kind", source.kind()},
                      {"metadata", source.metadata()},
                      {"pickle_globals", globals_json(source)},
                      {"tensors", tensors},
                      {"errors", errors},
                      {"issues", issues},
                      {"warnings", warnings},
                      {"ok", report.ok()}};
  return j;
}

std::string inspect_report_to_text(const InspectReport& report, bool errors_only) {
  const TensorSource& source = report.source;
  const size_t n = report.issues.size();
  std::string out = (report.ok() ? "OK " : "FAIL ") + source.path() + " (" + source.kind() + ", " +
                    std::to_string(source.tensors().size()) + " tensors, " +
                    std::to_string(source.files().size()) + " files)\n";
  // At 3 a.m. the errors come first: right under the verdict, not after a hundred rows.
  if (n > 0) out += "errors (" + std::to_string(n) + "):\n";
  for (const InspectIssue& i : report.issues) out += "  " + issue_text(i) + "\n";
  if (errors_only) return out;
  for (const InspectIssue& w : report.warnings) out += "WARNING: " + issue_text(w) + "\n";
  out += metadata_lines(source);
  out += unsupported_lines(source);
  out += globals_lines(source);
  for (const auto& r : report.tensors) {
    const SourceTensor& t = *r.tensor;
    const std::string hash = r.chunk_sha256.size() == 1 ? digest_hex(r.chunk_sha256[0])
                                                        : std::to_string(r.chunk_sha256.size()) + " chunks";
    bool damaged = false;
    for (size_t i = 0; i < r.chunk_sha256.size(); ++i)
      damaged = damaged || !source.chunk_matches(*r.read, i, r.chunk_sha256[i]);
    const bool in_damaged_member = report.damaged_tensors.count(t.name) != 0;
    char line[512];
    std::snprintf(line, sizeof(line), "%-44s %-10s %-5s %-14s %10llu  %s%s\n", t.name.c_str(),
                  t.component.c_str(), dtype_name(t.dtype), shape_to_string(t.shape).c_str(),
                  static_cast<unsigned long long>(t.bytes), hash.c_str(),
                  damaged             ? "  <-- FAIL chunk_sha256_mismatch"
                  : in_damaged_member ? "  <-- FAIL zip_crc_mismatch"
                                      : "");
    out += line;
    if (!t.alias_of.empty()) out += "    alias of " + t.alias_of + " (one tensor object: same bytes)\n";
    if (report.with_stats) out += stats_line(r.stats);
  }
  if (n > 0) {
    out += "FAIL: " + std::to_string(n) + (n == 1 ? " error" : " errors") +
           ", listed at the top (`ckptcheck inspect --errors` prints only them)\n";
  }
  return out;
}

}  // namespace ckpt

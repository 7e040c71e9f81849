#include "verifier/check/foreign_verifier.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "base/file_io.h"
#include "base/parallel_jobs.h"
#include "base/seconds_since.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"
#include "formats/safetensors_file.h"
#include "formats/tensor_file_open.h"
#include "layouts/layout_registry.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/chunk_coverage.h"
#include "verifier/check/pickle_gate.h"
#include "verifier/check/resume_state.h"
#include "verifier/check/trainer_verifier.h"
#include "verifier/tensors/nonfinite_count.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {

namespace {

// Lightning's ModelCheckpoint keeps its top-k bookkeeping (kth_value, best_model_score) as
// one-element tensors under `callbacks.`, starting at +inf (mode "min") or -inf ("max") until a
// monitored score replaces them: an Inf there is the callback's sentinel, not diverged training, and
// failing it failed every Lightning checkpoint with top-k saving. A NaN there still fails.
bool is_callback_score_sentinel(const ChunkInfo& c, const NonfiniteCount& n) {
  if (c.name.rfind("callbacks.", 0) != 0 || n.nan != 0) return false;
  for (const int64_t d : c.shape)
    if (d != 1) return false;
  return true;
}

// Streams chunk `index` of `file` through a NaN/Inf counter. Returns the bytes read.
Result<uint64_t> count_nonfinite(const TensorFile& file, size_t index, NonfiniteCount* total) {
  const ChunkInfo& c = file.chunks()[index];
  NonfiniteCounter counter(c.dtype);
  CKPT_RETURN_IF_ERROR(stream_chunk(file, index, [&](const uint8_t* p, size_t n) {
    if (counter.counts_anything()) counter.feed(p, n);
  }));
  *total += counter.count();
  return c.data_bytes;
}

// Warns of each dataset of a generic HDF5 file the reader listed but cannot read (compressed, ...).
void warn_unsupported_datasets(const TensorFile& file, const std::string& shard, VerifyReport& report) {
  const auto unsupported = file.metadata().find("unsupported_datasets");
  if (std::strcmp(file.format_name(), "hdf5") != 0 || unsupported == file.metadata().end() ||
      !unsupported->is_array())
    return;
  const auto text = [](const nlohmann::json& u, const char* key) {
    const auto it = u.find(key);
    if (it == u.end()) return std::string();
    return it->is_string() ? it->get<std::string>()
                           : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  for (const auto& u : *unsupported) {
    if (!u.is_object()) continue;
    const std::string path = text(u, "path");
    report.add_warning(verify_code::kDatasetUnsupported, shard, path,
                       file.path() + ": dataset '" + path + "' (" + text(u, "type") + " " + text(u, "shape") +
                           ") not checked: " + text(u, "reason"));
  }
}

// Checks one opened tensor file: its pickle globals (the gate), then, unless --quick, the CRC-32 of
// its members and every chunk readable with its NaN/Inf counts, chunks spread over `jobs` threads
// (each writes its own report; they are merged in chunk order, so any job count reports the same).
// Keras code in an HDF5 model's configs (formats/keras_config.h): refused like a code-running pickle
// global, in every mode, since keras.models.load_model runs it.
void check_keras_code(const TensorFile& file, const std::string& shard, VerifyReport& report) {
  const auto found = file.metadata().find("keras_code");
  const bool keras_archive = std::strcmp(file.format_name(), "keras") == 0;
  if ((std::strcmp(file.format_name(), "hdf5") != 0 && !keras_archive) || found == file.metadata().end() ||
      !found->is_array())
    return;
  for (const auto& k : *found) {
    const std::string layer = k.value("layer", std::string());
    const std::string where = keras_archive ? "member '" + k.value("attribute", std::string()) + "'"
                                            : "root attribute '" + k.value("attribute", std::string()) + "'";
    report.add_error(verify_code::kKerasCodeRefused, shard, layer,
                     file.path() + ": " + where + ", layer '" + layer + "' (" +
                         k.value("class_name", std::string()) + "): " + k.value("reason", std::string()) +
                         "; keras.models.load_model would run it. Nothing was unmarshalled, imported or run");
  }
}

// torch.load hands a TorchScript archive to torch.jit.load (formats/torch_load_dispatch.h), which
// compiles and runs its code/ and its classes' __setstate__, with weights_only=True too before torch
// 2.6 (CVE-2025-32434). A weights-only gate cannot pass a program.
void refuse_torchscript(const std::string& path, const std::string& shard, VerifyReport& report) {
  report.add_error(verify_code::kTorchScriptRefused, shard, "",
                   path +
                       ": a TorchScript archive (torch.jit.save): torch.load hands it to torch.jit.load, "
                       "which runs its code, even with weights_only=True before torch 2.6 "
                       "(CVE-2025-32434); --weights-only refuses programs (without it, verify reports it "
                       "as kind torchscript)");
}

}  // namespace

const char* unreadable_verify_code(const Status& st) {
  if (st.code() == StatusCode::kAmbiguous) return verify_code::kReadingAmbiguous;
  return st.code() == StatusCode::kTruncated ? verify_code::kShardTruncated : verify_code::kShardUnreadable;
}

namespace {

// What a file holding pickles is, by the loader that reads it: the role a report gives a file whose
// checkpoint's layout names none.
const char* role_of_format(const char* format) {
  static const std::pair<const char*, const char*> kRoles[] = {
      {"pytorch", "a torch.save file (torch.load reads it)"},
      {"torchscript", "a TorchScript program (torch.jit.load reads it)"},
      {"pickle", "a pickle (pickle.load reads it)"},
      {"numpy", "a numpy array (numpy.load reads it)"},
      {"dcp", "DCP metadata (torch.distributed.checkpoint reads it)"}};
  for (const auto& [name, role] : kRoles) {
    if (std::strcmp(format, name) == 0) return role;
  }
  return nullptr;
}

}  // namespace

void check_tensor_file(const TensorFile& file, const std::string& shard, const VerifyOptions& options,
                       VerifyReport& report, PickleLoader loader) {
  // A layout's role for the file, set before, wins.
  if (const char* role = role_of_format(file.format_name())) report.file_roles.emplace(shard, role);
  // TorchScript's pickles are read by torch.jit.load's own unpickler, whatever holds the archive.
  if (std::strcmp(file.format_name(), "torchscript") == 0) {
    loader = PickleLoader::kTorchScript;
    if (options.weights_only) refuse_torchscript(file.path(), shard, report);
  }
  check_pickle_globals(file.pickle_globals(), loader, options.allowed_globals, file.path(), shard, "",
                       report);
  check_keras_code(file, shard, report);
  warn_unsupported_datasets(file, shard, report);
  // The container's checks: under --quick those of the members read for the structure only.
  const Status crc = options.quick ? file.check_structure_members() : file.check_container();
  if (!crc.is_ok()) {
    // Name the tensors stored in the damaged members, as inspect does (an alias's bytes are its
    // first name's).
    std::vector<std::string> hit;
    for (const size_t i : chunks_in_damaged_members(file)) {
      if (file.chunks()[i].alias_of.empty()) hit.push_back(file.chunks()[i].name);
    }
    report.add_error(container_issue_code(crc), shard, damaged_tensor_list(hit),
                     container_finding_message(crc.message(), hit));
  }
  if (options.quick) return;
  const size_t count = file.chunks().size();
  std::vector<VerifyReport> per_chunk(count);
  run_parallel(count, resolve_jobs(options.jobs, count), [&](size_t i) {
    const ChunkInfo& c = file.chunks()[i];
    if (!c.alias_of.empty()) return;  // the same bytes as the chunk it names, read there
    VerifyReport& out = per_chunk[i];
    NonfiniteCount n;
    auto read = count_nonfinite(file, i, &n);
    if (!read.is_ok()) {
      out.add_error(is_damage(read.status()) && read.status().code() == StatusCode::kTruncated
                        ? verify_code::kShardTruncated
                        : verify_code::kShardUnreadable,
                    shard, c.name, read.status().message());
      return;
    }
    out.bytes_hashed += *read;
    if (is_callback_score_sentinel(c, n)) return;
    add_nonfinite_error(out, shard, c.label(), c.dtype, c.shape, n);
  });
  for (VerifyReport& r : per_chunk) merge_report(std::move(r), report);
}

namespace {

void require_weights_only_note(VerifyReport& report, const char* code, const std::string& shard,
                               const std::string& what) {
  report.add_error(code, shard, "",
                   what + "; a resume would lack it (pass --weights-only if this holds only model weights)");
}

bool has_key(const TensorFile& file, const std::string& key) {
  const std::string dotted = key + ".";
  for (const auto& c : file.chunks()) {
    if (c.name == key || starts_with(c.name, dotted)) return true;
  }
  const nlohmann::json& m = file.metadata();
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (starts_with(it.key(), dotted)) return true;
    if (it.key() == key && !it.value().is_null() && !it.value().empty()) return true;
  }
  if (m.contains("value") && m["value"].is_object()) {
    const auto& v = m["value"];
    if (v.contains(key) && !v[key].is_null() && !v[key].empty()) return true;
  }
  return false;
}

bool has_key_prefix(const TensorFile& file, const std::string& prefix) {
  for (const auto& c : file.chunks()) {
    if (starts_with(c.name, prefix)) return true;
  }
  const nlohmann::json& m = file.metadata();
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (starts_with(it.key(), prefix) && !it.value().is_null() && !it.value().empty()) return true;
  }
  return false;
}

bool is_lightning(const TensorFile& file) {
  return has_key(file, "pytorch-lightning_version") ||
         file.metadata().contains("pytorch-lightning_version") ||
         (has_key(file, "state_dict") &&
          (has_key(file, "global_step") || file.metadata().contains("global_step")));
}

void check_file_resumability(const TensorFile& file, const std::string& shard, VerifyReport& report) {
  ResumeStateTree tree;
  tree.add_file(file);
  report.resume_state = tree.find();
  if (is_lightning(file)) {
    if (!has_key(file, "optimizer_states"))
      require_weights_only_note(report, verify_code::kOptimizerStateMissing, shard,
                                "Lightning checkpoint without optimizer_states");
    if (!has_key(file, "lr_schedulers"))
      require_weights_only_note(report, verify_code::kSchedulerStateMissing, shard,
                                "Lightning checkpoint without lr_schedulers");
    return;
  }
  // By structure wherever it sits, or by the names this check always accepted.
  if (!holds_resume_part(report.resume_state, "optimizer") && !has_key_prefix(file, "optim") &&
      !has_key(file, "state") && !has_key(file, "param_groups")) {
    report.add_error(verify_code::kOptimizerStateMissing, shard, "",
                     optimizer_missing_advice("no optimizer state (no dict with 'state' and 'param_groups' "
                                              "anywhere, no 'optimizer*' key)",
                                              report.resume_state));
  }
}

// metadata.json's problems, then common.pt: present, readable, its CRC-32s and NaN/Inf counts.
void check_megatron_parts(const MegatronParts& megatron, const VerifyOptions& options, VerifyReport& report) {
  for (const std::string& p : megatron.config_problems)
    report.add_error(verify_code::kMegatronConfigInvalid, kMegatronConfigFileName, "", p);
  if (!megatron.has_common) {
    report.add_error(verify_code::kMegatronCommonMissing, kMegatronCommonFileName, "",
                     megatron.common_status.message());
    return;
  }
  if (!megatron.common) {
    const Status& st = megatron.common_status;
    report.add_error(st.code() == StatusCode::kTruncated ? verify_code::kShardTruncated
                                                         : verify_code::kMegatronCommonUnreadable,
                     kMegatronCommonFileName, "", st.message());
    return;
  }
  ++report.shards;
  report.tensors += megatron.common->chunks().size();
  check_tensor_file(*megatron.common, kMegatronCommonFileName, options, report,
                    PickleLoader::kMegatronCommon);
}

// Phase 1: every storage item inside its file, no two overlapping, and every byte of each file
// accounted for. Returns which items lie inside their files (the later phases read only those).
std::vector<bool> check_item_extents(const DcpCheckpoint& dcp, const std::string& dir, VerifyReport& report) {
  const DcpMetadata& md = dcp.metadata();
  std::vector<bool> in_bounds(md.items.size(), false);
  std::vector<std::vector<size_t>> by_file(dcp.files().size());
  std::vector<bool> truncated(dcp.files().size(), false);  // its tail belongs to an item cut short
  for (size_t i = 0; i < md.items.size(); ++i) {
    const std::string problem = dcp.item_bounds_problem(i);
    if (!problem.empty()) {
      report.add_error(verify_code::kItemOutsideFile, md.items[i].relative_path, md.items[i].fqn, problem);
      truncated[md.items[i].file] = true;
      continue;
    }
    in_bounds[i] = true;
    by_file[md.items[i].file].push_back(i);
  }
  // Each file's byte extents: its items and, in DCP's safetensors serialization, the blob's header.
  // An item whose blob header disagrees with `.metadata` is left out here (reported unreadable below).
  struct Extent {
    uint64_t begin, end;
    std::string label, fqn;
  };
  for (size_t f = 0; f < by_file.size(); ++f) {
    std::vector<Extent> extents;
    for (size_t i : by_file[f]) {
      const DcpItem& it = md.items[i];
      if (dcp.item_problem(i).empty())
        extents.push_back({it.offset, it.offset + it.length, "item " + it.label(), it.fqn});
    }
    uint64_t header_begin = 0, header_end = 0;
    if (dcp.safetensors_header_range(f, &header_begin, &header_end))
      extents.push_back({header_begin, header_end, "the safetensors header", ""});
    std::stable_sort(extents.begin(), extents.end(),
                     [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    const std::string path = dir + "/" + dcp.files()[f];
    uint64_t end = 0;
    const Extent* prev = nullptr;
    for (const Extent& e : extents) {
      if (prev && e.begin < end) {
        report.add_error(verify_code::kItemOverlap, dcp.files()[f], e.fqn,
                         path + ": " + e.label + " at " + hex_offset(e.begin) + " overlaps " + prev->label +
                             " (" + hex_offset(prev->begin) + ".." + hex_offset(end) + ")");
      } else if (e.begin > end) {
        report.add_error(verify_code::kUnreferencedBytes, dcp.files()[f], "",
                         path + ": " + std::to_string(e.begin - end) + " bytes at " + hex_offset(end) +
                             " belong to no item");
      }
      if (e.end > end) {
        end = e.end;
        prev = &e;
      }
    }
    const uint64_t size = dcp.file_source(f).size();
    if (end < size && !extents.empty() && !truncated[f]) {
      report.add_error(verify_code::kUnreferencedBytes, dcp.files()[f], "",
                       path + ": " + std::to_string(size - end) + " bytes at " + hex_offset(end) +
                           " after the last item belong to no item (trailing garbage)");
    }
  }

  return in_bounds;
}

// Phase 2: each tensor's chunks cover it exactly once; every item parses, passes the pickle gate
// and, unless --quick, its CRC-32 and NaN/Inf counts. Tensors are spread over `jobs` threads and
// their findings merged in order, so any job count reports the same.
void check_tensor_items(const DcpCheckpoint& dcp, const std::string& dir, const std::vector<bool>& in_bounds,
                        const VerifyOptions& options, VerifyReport& report) {
  const DcpMetadata& md = dcp.metadata();
  std::vector<VerifyReport> per_tensor(md.tensors.size());
  run_parallel(md.tensors.size(), resolve_jobs(options.jobs, md.tensors.size()), [&](size_t ti) {
    const DcpTensor& t = md.tensors[ti];
    VerifyReport& out = per_tensor[ti];
    ManifestTensor mt;
    mt.name = t.fqn;
    mt.dtype = t.dtype;
    mt.shape = t.shape;
    for (const DcpChunk& c : t.chunks) {
      ManifestChunk mc;
      mc.shard = c.item == SIZE_MAX ? 0 : md.items[c.item].file;
      mc.offsets = Dims(DimsView(c.offsets));
      mc.shape = Dims(DimsView(c.sizes));
      mt.chunks.push_back(std::move(mc));
    }
    check_chunk_coverage(mt, out);
    NonfiniteCount n;
    for (size_t ci = 0; ci < t.chunks.size(); ++ci) {
      const DcpChunk& c = t.chunks[ci];
      if (c.item == SIZE_MAX) {
        out.add_error(verify_code::kItemMissing, "", t.fqn,
                      dir + "/.metadata: chunk of " + t.fqn + " at " + shape_to_string(c.offsets) +
                          " has no storage item");
        continue;
      }
      if (!in_bounds[c.item]) continue;  // already reported
      const DcpItem& it = md.items[c.item];
      auto item = dcp.open_tensor_item(ti, ci);
      if (!item.is_ok()) {
        out.add_error(verify_code::kItemUnreadable, it.relative_path, t.fqn, item.status().message());
        continue;
      }
      const TensorFile& file = *item->first;
      check_pickle_globals(file.pickle_globals(), PickleLoader::kTorchLoad, options.allowed_globals,
                           dir + "/" + it.relative_path + " item " + it.label(), it.relative_path, t.fqn,
                           out);
      const Status crc = options.quick ? file.check_structure_members() : file.check_container();
      if (!crc.is_ok())
        out.add_error(container_issue_code(crc), it.relative_path, t.fqn,
                      "item " + it.label() + ": " + crc.message());
      if (options.quick) continue;
      auto read = count_nonfinite(file, item->second, &n);
      if (!read.is_ok()) {
        out.add_error(verify_code::kItemUnreadable, it.relative_path, t.fqn,
                      "item " + it.label() + ": " + read.status().message());
      } else {
        out.bytes_hashed += *read;
      }
    }
    add_nonfinite_error(out, "", t.fqn, t.dtype, t.shape, n);
  });
  for (VerifyReport& r : per_tensor) merge_report(std::move(r), report);
}

// Phase 3: every bytes entry (optimizer state saved with torch.save) read as a torch.save file.
void check_bytes_items(const DcpCheckpoint& dcp, const std::string& dir, const std::vector<bool>& in_bounds,
                       const VerifyOptions& options, VerifyReport& report) {
  const DcpMetadata& md = dcp.metadata();
  for (const DcpBytesEntry& b : md.bytes) {
    if (b.item == SIZE_MAX) {
      report.add_error(verify_code::kItemMissing, "", b.fqn,
                       dir + "/.metadata: bytes entry " + b.fqn + " has no storage item");
      continue;
    }
    if (!in_bounds[b.item]) continue;
    const DcpItem& it = md.items[b.item];
    auto file = dcp.open_item(b.item);
    if (!file.is_ok()) {
      report.add_error(verify_code::kItemUnreadable, it.relative_path, b.fqn, file.status().message());
      continue;
    }
    VerifyReport inner;
    check_tensor_file(**file, it.relative_path, options, inner);
    for (auto& e : inner.errors) {
      e.tensor = e.tensor.empty() ? b.fqn : b.fqn + "." + e.tensor;
      e.message = "item " + it.label() + ": " + e.message;
      report.errors.push_back(std::move(e));
    }
    for (auto& a : inner.accepted_globals) report.add_accepted_global(std::move(a));
    report.bytes_hashed += inner.bytes_hashed;
  }
}

// Phase 4: what a resume would lack, by convention (DCP "optim*" keys; Megatron's common.pt).
void check_dcp_resumability(const DcpCheckpoint& dcp, const std::string& dir, VerifyReport& report) {
  const DcpMetadata& md = dcp.metadata();
  const MegatronParts& megatron = dcp.megatron();
  ResumeStateTree tree;
  for (const auto& t : md.tensors) tree.add_tensor(t.fqn, t.dtype, t.shape);
  for (const auto& b : md.bytes) tree.add_value(b.fqn, {{"__bytes__", true}});
  report.resume_state = tree.find();
  bool optimizer = holds_resume_part(report.resume_state, "optimizer");
  for (const auto& t : md.tensors) optimizer = optimizer || starts_with(t.fqn, "optim");
  for (const auto& b : md.bytes) optimizer = optimizer || starts_with(b.fqn, "optim");
  if (megatron.common) optimizer = optimizer || has_key(*megatron.common, "optimizer");
  if (!optimizer)
    report.add_error(verify_code::kOptimizerStateMissing, "", "",
                     optimizer_missing_advice(dir + ": no optimizer state (no .metadata key starting with "
                                                    "'optim', no 'state' and 'param_groups' side by side)",
                                              report.resume_state));
  if (megatron.common) {
    const std::string common = base_name(megatron.common->path());
    if (!has_key(*megatron.common, "opt_param_scheduler"))
      require_weights_only_note(report, verify_code::kSchedulerStateMissing, common,
                                megatron.common->path() + ": no 'opt_param_scheduler'");
    if (!has_key(*megatron.common, "iteration"))
      require_weights_only_note(report, verify_code::kStepStateMissing, common,
                                megatron.common->path() + ": no 'iteration'");
  }
}

// A DCP directory below a sealed folder or model folder: its structure and its pickle gate, no
// payload (the folder's seal covers the bytes), no resume-state convention (it is one part of the
// folder). Findings name files relative to the folder.
void check_nested_dcp(const std::string& dir, const std::string& sub, const VerifyOptions& options,
                      VerifyReport& report) {
  VerifyOptions nested = options;
  nested.quick = true;
  nested.weights_only = true;
  VerifyReport found = verify_dcp_dir(sub.empty() ? dir : dir + "/" + sub, nested);
  for (VerifyIssue& e : found.errors) {
    e.shard = sub.empty() ? e.shard : e.shard.empty() ? sub : sub + "/" + e.shard;
    report.errors.push_back(std::move(e));
  }
  for (AcceptedGlobal& a : found.accepted_globals) report.add_accepted_global(std::move(a));
}

}  // namespace

VerifyReport verify_dcp_dir(const std::string& raw_dir, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = strip_trailing_slashes(raw_dir);
  VerifyReport report;
  report.path = dir;
  auto opened = DcpCheckpoint::open(dir);
  if (!opened.is_ok()) {
    const Status& st = opened.status();
    const char* code = st.code() == StatusCode::kNotFound          ? verify_code::kShardMissing
                       : st.code() == StatusCode::kInvalidArgument ? verify_code::kShardPathUnsafe
                                                                   : verify_code::kDcpMetadataInvalid;
    report.add_error(code, "", "", st.message());
    report.seconds = seconds_since(start);
    return report;
  }
  const DcpCheckpoint& dcp = *opened;
  const DcpMetadata& md = dcp.metadata();
  report.shards = dcp.files().size();
  report.tensors = md.tensors.size();
  check_pickle_globals(
      md.globals, dcp.megatron().has_config ? PickleLoader::kMegatronMetadata : PickleLoader::kDcpMetadata,
      options.allowed_globals, dir + "/" + kDcpMetadataFileName, kDcpMetadataFileName, "", report);

  const std::vector<bool> in_bounds = check_item_extents(dcp, dir, report);
  check_tensor_items(dcp, dir, in_bounds, options, report);
  check_bytes_items(dcp, dir, in_bounds, options, report);
  const MegatronParts& megatron = dcp.megatron();
  if (megatron.present) check_megatron_parts(megatron, options, report);

  if (!options.weights_only) check_dcp_resumability(dcp, dir, report);
  report.seconds = seconds_since(start);
  return report;
}

VerifyReport verify_foreign_file(const std::string& path, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report;
  report.path = path;
  auto file = open_tensor_file(path);
  if (!file.is_ok()) {
    report.add_error(unreadable_verify_code(file.status()), base_name(path), "", file.status().message());
    report.seconds = seconds_since(start);
    return report;
  }
  report.shards = 1;
  report.tensors = (*file)->chunks().size();
  check_tensor_file(**file, base_name(path), options, report);
  std::string why;
  if (options.weights_only && is_zero3_placeholder_states(**file, &why))
    report.add_error(verify_code::kZeroPlaceholdersOnly, base_name(path), "", path + ": " + why);
  // A plain pickle, a numpy array or a TorchScript program is no training state to resume.
  const bool no_checkpoint = std::strcmp((*file)->format_name(), "pickle") == 0 ||
                             std::strcmp((*file)->format_name(), "numpy") == 0 ||
                             std::strcmp((*file)->format_name(), "keras") == 0 ||
                             std::strcmp((*file)->format_name(), "torchscript") == 0;
  if (!options.weights_only && !no_checkpoint) check_file_resumability(**file, base_name(path), report);
  if (!no_checkpoint) check_state_steps(**file, report, !options.weights_only);
  report.seconds = seconds_since(start);
  return report;
}

VerifyReport verify_foreign_dir(const std::string& raw_dir, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = strip_trailing_slashes(raw_dir);
  VerifyReport report;
  report.path = dir;
  static const char* kTensorExtensions[] = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5"};
  ResumeStateTree tree;  // resume state in any file, whatever the file's name
  for (const std::string& name : list_files_under(dir, 1)) {
    if (name.find('/') != std::string::npos) continue;  // top level only
    const std::string path = dir + "/" + name;
    if (!is_regular_file(path)) continue;
    bool tensor_ext = false;
    for (const char* e : kTensorExtensions) tensor_ext = tensor_ext || ends_with(name, e);
    auto file = open_tensor_file(path);
    if (!file.is_ok()) {
      if (tensor_ext || file.status().code() == StatusCode::kAmbiguous)
        report.add_error(unreadable_verify_code(file.status()), name, "", file.status().message());
      continue;
    }
    ++report.shards;
    report.tensors += (*file)->chunks().size();
    check_tensor_file(**file, name, options, report);
    if (!options.weights_only) tree.add_file(**file, name);
  }
  if (!options.weights_only) {
    report.resume_state = tree.find();
    bool rng_file = false;
    for (const std::string& name : list_files_under(dir, 1))
      rng_file = rng_file || (starts_with(name, "rng_state") && ends_with(name, ".pth"));
    const bool step_file = is_regular_file(dir + "/trainer_state.json");
    // The Trainer's file names, or the same state found by its structure in any file; --weights-only
    // is suggested only for a folder that holds no resume state at all.
    // (A step counter alone is no evidence: trainer_state.json is written by save_only_model too.)
    bool resumable =
        is_regular_file(dir + "/optimizer.pt") || is_regular_file(dir + "/scheduler.pt") || rng_file;
    for (const ResumeStateFound& f : report.resume_state) resumable = resumable || f.part != "step";
    const auto need = [&](bool present, const char* part, const char* code, const std::string& missing) {
      if (present || holds_resume_part(report.resume_state, part)) return;
      const std::string what = dir + "/" + missing + ": missing, and no " + part + " state in any file";
      if (resumable)
        report.add_error(code, "", "", what + "; a resume would lack it");
      else
        require_weights_only_note(report, code, "", what);
    };
    need(is_regular_file(dir + "/optimizer.pt"), "optimizer", verify_code::kOptimizerStateMissing,
         "optimizer.pt");
    need(is_regular_file(dir + "/scheduler.pt"), "scheduler", verify_code::kSchedulerStateMissing,
         "scheduler.pt");
    need(step_file, "step", verify_code::kStepStateMissing, "trainer_state.json");
    need(rng_file, "rng", verify_code::kRngStateMissing, "rng_state*.pth");
  }
  report.seconds = seconds_since(start);
  return report;
}

VerifyReport verify_safetensors_index(const std::string& index_path, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report;
  report.path = index_path;
  auto index = open_safetensors_index(index_path);
  if (!index.is_ok()) {
    const Status& st = index.status();
    const bool misplaced = st.message().find("weight_map puts tensor") != std::string::npos;
    const char* code =
        misplaced                             ? verify_code::kChunkMissingInShard
        : st.code() == StatusCode::kTruncated ? verify_code::kShardTruncated
        : st.code() == StatusCode::kNotFound || st.message().find("No such file") != std::string::npos
            ? verify_code::kShardMissing
            : verify_code::kShardUnreadable;
    report.add_error(code, base_name(index_path), "", st.message());
    report.seconds = seconds_since(start);
    return report;
  }
  // The tensors are the names weight_map lists, each in its shard (what inspect and diff read); a
  // shard's other tensors are findings, worded as inspect words them (TensorSource::findings).
  for (const SafetensorsIndexShard& shard : index->shards) {
    ++report.shards;
    report.tensors += shard.tensors.size();
    check_tensor_file(*shard.opened, shard.file, options, report);
  }
  for (const SourceFinding& f : sharded_index_findings(*index)) {
    if (f.error)
      report.add_error(f.code, f.file, f.tensor, f.message);
    else
      report.add_warning(f.code, f.file, f.tensor, f.message);
  }
  report.seconds = seconds_since(start);
  return report;
}

void check_pickles_under(const std::string& raw_dir, int min_depth, const VerifyOptions& options,
                         VerifyReport& report, const std::vector<std::string>& checked) {
  const std::string dir = strip_trailing_slashes(raw_dir);
  // Folder (relative) -> the files that are its DCP checkpoint's own (the DCP layout's list:
  // .metadata, the .distcp files, Megatron's metadata.json and common.pt), empty when it holds none.
  std::map<std::string, std::set<std::string>> dcp_dirs;
  // A file is checked when it, or a folder above it, is listed: one set lookup per path prefix, so a
  // DCP folder of thousands of .distcp files costs no more than listing them.
  const std::set<std::string> listed(checked.begin(), checked.end());
  const auto already_checked = [&](const std::string& name) {
    for (size_t end = name.find('/'); end != std::string::npos; end = name.find('/', end + 1)) {
      if (listed.count(name.substr(0, end))) return true;
    }
    return listed.count(name) > 0;
  };
  for (const std::string& name : list_files_under(dir, 16)) {
    const int depth = 1 + static_cast<int>(std::count(name.begin(), name.end(), '/'));
    if (depth < min_depth || already_checked(name)) continue;
    const std::string path = dir + "/" + name;
    // A DCP directory below: its `.distcp` files are runs of archives that its `.metadata` places,
    // never sniffed as one zip each; its pickles (`.metadata`, every item) pass DCP's own gate.
    const std::string sub = depth == 1 ? "" : parent_dir(name);
    auto known = dcp_dirs.find(sub);
    if (known == dcp_dirs.end()) {
      std::set<std::string> own;
      if (is_dcp_directory(parent_dir(path))) {
        for (const LayoutFile& f : dcp_folder_files(parent_dir(path)))
          if (f.role != FileRole::kOther) own.insert(f.name);
      }
      known = dcp_dirs.emplace(sub, std::move(own)).first;
    }
    // Only DCP's own files are DCP's: any other file beside them (a stray extra.pt) passes the gate.
    if (known->second.count(base_name(name))) {
      if (base_name(name) == kDcpMetadataFileName) check_nested_dcp(dir, sub, options, report);
      continue;
    }
    const CheckpointKind kind = detect_checkpoint_kind(path);
    if (kind != CheckpointKind::kTorchSave && kind != CheckpointKind::kTorchSaveLegacy &&
        kind != CheckpointKind::kTorchScript && kind != CheckpointKind::kPickle &&
        kind != CheckpointKind::kNumpy)
      continue;
    auto file = open_tensor_file(path);
    if (!file.is_ok()) {
      // A pickle we cannot read is not one we can vouch for.
      report.add_error(unreadable_verify_code(file.status()), name, "", file.status().message());
      continue;
    }
    if (kind == CheckpointKind::kTorchScript && options.weights_only) refuse_torchscript(path, name, report);
    check_pickle_globals(
        (*file)->pickle_globals(),
        kind == CheckpointKind::kTorchScript ? PickleLoader::kTorchScript : PickleLoader::kTorchLoad,
        options.allowed_globals, path, name, "", report);
  }
}

}  // namespace ckpt

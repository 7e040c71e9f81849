#include "verifier/check/trainer_verifier.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/seconds_since.h"
#include "base/text.h"
#include "formats/tensor_file_open.h"
#include "verifier/check/foreign_verifier.h"
#include "verifier/check/pickle_gate.h"
#include "verifier/tensors/state_step.h"

namespace ckpt {

namespace {

// Every non-tensor value of `j` whose dotted path ends with `key` (".last_epoch" or the whole path).
void find_values(const nlohmann::json& j, const std::string& path, const std::string& key,
                 std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      find_values(it.value(), path.empty() ? it.key() : path + "." + it.key(), key, out);
    }
    return;
  }
  if (path == key || ends_with(path, "." + key)) out.emplace_back(path, j);
}

// The value of a one-element tensor (torch 1.13 keeps an optimizer's `step` as tensor(10.)).
std::optional<double> chunk_number(const TensorFile& file, size_t i) {
  const ChunkInfo& c = file.chunks()[i];
  if (c.data_bytes > 8 || c.data_bytes == 0) return std::nullopt;
  uint8_t raw[8] = {};
  if (!file.read_chunk(i, 0, raw, c.data_bytes).is_ok()) return std::nullopt;
  if (c.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, raw, 4);
    return f;
  }
  if (c.dtype == DType::kF64) {
    double d;
    std::memcpy(&d, raw, 8);
    return d;
  }
  if (c.dtype == DType::kI64) {
    int64_t i64;
    std::memcpy(&i64, raw, 8);
    return static_cast<double>(i64);
  }
  return std::nullopt;
}

// The number a state holds at a path ending in `key`: a plain value, or a one-element tensor. The
// first one found, in pickle order.
std::optional<double> number_at(const TensorFile& file, const std::string& key) {
  std::vector<std::pair<std::string, nlohmann::json>> found;
  find_values(file.metadata(), "", key, found);
  for (const auto& [path, v] : found) {
    if (v.is_number()) return v.get<double>();
  }
  for (size_t i = 0; i < file.chunks().size(); ++i) {
    const ChunkInfo& c = file.chunks()[i];
    if (c.name != key && !ends_with(c.name, "." + key)) continue;
    if (auto v = chunk_number(file, i)) return v;
  }
  return std::nullopt;
}

// An optimizer's per-parameter step: the first "...state.<n>.step" value.
std::optional<double> optimizer_step(const TensorFile& file) {
  const auto per_param = [](const std::string& path) {
    if (!ends_with(path, ".step")) return false;
    const std::string head = path.substr(0, path.size() - 5);
    const size_t dot = head.rfind('.');
    const std::string index = head.substr(dot == std::string::npos ? 0 : dot + 1);
    const std::string state = dot == std::string::npos ? "" : head.substr(0, dot);
    return !index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
           (state == "state" || ends_with(state, ".state"));
  };
  for (size_t i = 0; i < file.chunks().size(); ++i) {
    if (per_param(file.chunks()[i].name)) {
      if (auto v = chunk_number(file, i)) return v;
    }
  }
  std::vector<std::pair<std::string, nlohmann::json>> found;
  find_values(file.metadata(), "", "step", found);
  for (const auto& [path, v] : found) {
    if (per_param(path) && v.is_number()) return v.get<double>();
  }
  return std::nullopt;
}

// A file DeepSpeed's load_checkpoint reads: in its own folder, or the tag folder under a Trainer's.
bool read_by_deepspeed(const TrainerLayout& layout, const LayoutFile& f) {
  return layout.kind == TrainerLayoutKind::kDeepSpeed || f.loader == kDeepSpeedLoader;
}

PickleLoader loader_for(const TrainerLayout& layout, const LayoutFile& f) {
  if (read_by_deepspeed(layout, f)) return PickleLoader::kDeepSpeed;
  if (f.role == FileRole::kRng) return PickleLoader::kTrainerRng;
  return PickleLoader::kTorchLoad;
}

std::string join(const std::vector<std::string>& items, size_t max) {
  std::string out;
  for (size_t k = 0; k < items.size() && k < max; ++k) out += (k ? ", " : "") + items[k];
  if (items.size() > max) out += " and " + std::to_string(items.size() - max) + " more";
  return out;
}

// A file its trainer never loads on resume: the gate's refusals become one warning (never load it).
void warn_not_loaded(const TensorFile& file, const LayoutFile& f, const TrainerLayout& layout,
                     const VerifyOptions& options, VerifyReport& report) {
  VerifyReport gate;
  check_pickle_globals(file.pickle_globals(), PickleLoader::kTorchLoad, options.allowed_globals, file.path(),
                       f.name, "", gate);
  std::vector<std::string> refused;
  for (const VerifyIssue& e : gate.errors) {
    if (!e.refused_global.name.empty()) refused.push_back(e.refused_global.name);
  }
  if (refused.empty()) return;
  report.add_warning(verify_code::kFileNotLoadedOnResume, f.name, "",
                     file.path() + ": " + file_role_name(f.role) + ", which " +
                         trainer_layout_name(layout.kind) + " never loads on resume; it names " +
                         std::to_string(refused.size()) + " globals torch.load(weights_only=True) refuses (" +
                         join(refused, 4) +
                         "), which torch.load(weights_only=False) would import and call: never load it so "
                         "(verified on its own, it fails)");
}

// ZeRO's flat fp32 partitions against the model's param_shapes, as zero_to_fp32.py reassembles them:
// stage 1/2 saves each rank's slice of a group's flat buffer without its padding, so the slices of
// all ranks hold every element of the group once; stage 3 pads each parameter to a multiple of the
// world size and gives every rank ceil(numel / world) of it.
struct ZeroPartitions {
  nlohmann::json param_shapes;      // the model states' list of {name: shape} per group
  std::map<size_t, uint64_t> held;  // group -> fp32 elements across the ranks' files
  bool stage3 = false;

  void add_partitions(const TensorFile& file) {
    for (const ChunkInfo& c : file.chunks()) {
      for (const char* key : {"single_partition_of_fp32_groups.", "fp32_flat_groups."}) {
        const size_t at = c.name.find(key);
        if (at == std::string::npos) continue;
        const std::string index = c.name.substr(at + std::strlen(key));
        if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
        stage3 = stage3 || std::strcmp(key, "fp32_flat_groups.") == 0;
        held[std::stoul(index)] += c.data_bytes / dtype_size(c.dtype);
      }
    }
  }

  void check(int world, const std::string& dir, VerifyReport& report) const {
    if (!param_shapes.is_array() || held.empty()) return;
    for (size_t g = 0; g < param_shapes.size(); ++g) {
      if (!param_shapes[g].is_object()) return;
      uint64_t need = 0;
      for (const auto& [name, shape] : param_shapes[g].items()) {
        uint64_t numel = 1;
        for (const auto& d : shape)
          numel *= d.is_number_integer() && d.get<int64_t>() >= 0 ? d.get<uint64_t>() : 0;
        need += stage3 ? (numel + world - 1) / world * world : numel;
      }
      const auto it = held.find(g);
      const uint64_t have = it == held.end() ? 0 : it->second;
      if (have == need) continue;
      report.add_error(verify_code::kZeroPartitionMismatch, "", "",
                       dir + ": parameter group " + std::to_string(g) + ": the " + std::to_string(world) +
                           " ranks' ZeRO" + (stage3 ? "-3" : "-1/2") + " fp32 partitions hold " +
                           std::to_string(have) + " elements, the model's param_shapes need " +
                           std::to_string(need) +
                           ": a rank's partition is from another save or another world size, and the "
                           "weights cannot be reassembled (zero_to_fp32 would fail or mix steps)");
    }
  }
};

struct Steps {
  std::vector<std::pair<std::string, double>> said;  // "trainer_state.json global_step" -> 10
  void add(const std::string& who, std::optional<double> v) {
    if (v && std::isfinite(*v)) said.emplace_back(who, *v);
  }
};

std::string number_text(double v);

void check_steps(const Steps& steps, VerifyReport& report) {
  if (steps.said.size() < 2) return;
  bool agree = true;
  for (const auto& [who, v] : steps.said) agree = agree && v == steps.said.front().second;
  if (agree) return;
  std::string list;
  for (const auto& [who, v] : steps.said) list += (list.empty() ? "" : ", ") + who + " " + number_text(v);
  report.add_error(verify_code::kStepDisagreement, "", "",
                   report.path + ": the step disagrees across the checkpoint's files (" + list +
                       "): a resume would continue from one step with state from another");
}

void need(VerifyReport& report, bool present, const char* code, const std::string& message) {
  if (!present) report.add_error(code, "", "", message);
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "3" when the file holds stage 3's fp32_flat_groups, "1/2" for stage 1/2's
// single_partition_of_fp32_groups, "" when neither.
std::string zero_partition_kind(const TensorFile& file) {
  for (const ChunkInfo& c : file.chunks()) {
    if (c.name.find("fp32_flat_groups.") != std::string::npos) return "3";
    if (c.name.find("single_partition_of_fp32_groups.") != std::string::npos) return "1/2";
  }
  return "";
}

// Every DeepSpeed file of one save names one ZeRO stage (stages 1 and 2 share a layout, so the
// partitions tell 1/2 from 3): a file from a run of another stage cannot be loaded with the rest.
void check_zero_stages(const Steps& stages, const std::string& dir, VerifyReport& report) {
  bool agree = true;
  const auto family = [](double stage) { return stage >= 3 ? 3 : stage >= 1 ? 2 : 0; };
  for (const auto& [who, v] : stages.said) agree = agree && family(v) == family(stages.said.front().second);
  if (agree) return;
  std::string list;
  for (const auto& [who, v] : stages.said)
    list += (list.empty() ? "" : ", ") + who +
            (who.find("partitions") == std::string::npos ? " " + number_text(v) : "");
  report.add_error(verify_code::kZeroPartitionMismatch, "", "",
                   dir + ": the DeepSpeed files were saved under different ZeRO stages (" + list +
                       "): a file from another run, which load_checkpoint cannot load with the rest");
}

// FSDP SHARDED_STATE_DICT under the Trainer: its resume reads pytorch_model_fsdp_0/ and optimizer_0/
// (load_fsdp_model / load_fsdp_optimizer with index 0), so sharded folders of other indexes alone
// resume nothing.
void check_fsdp_index_zero(const TrainerLayout& layout, const VerifyOptions& options, VerifyReport& report) {
  const std::pair<FileRole, const char*> parts[] = {{FileRole::kModel, "pytorch_model_fsdp_0"},
                                                    {FileRole::kOptimizer, "optimizer_0"}};
  for (const auto& [role, wanted] : parts) {
    if (role == FileRole::kOptimizer && options.weights_only) continue;
    std::string sharded;
    bool other = false, zero = false;
    for (const LayoutFile* f : layout.all(role)) {
      if (f->loader != kDcpLoader) {
        other = true;
        continue;
      }
      sharded += (sharded.empty() ? "" : ", ") + f->name + "/";
      zero = zero || f->name == wanted;
    }
    if (sharded.empty() || other || zero) continue;
    report.add_error(
        role == FileRole::kModel ? verify_code::kShardMissing : verify_code::kOptimizerStateMissing, "", "",
        layout.dir + ": no " + wanted + "/ (found " + sharded +
            "): under FSDP SHARDED_STATE_DICT the Trainer's resume reads " + wanted +
            "/ (index 0), so it would fail");
  }
}

// What the folder holds of a resume's state, by file, as verify lists it for a single file
// (`resume state: optimizer at optimizer.pt, ...`; "resume_state" in --json).
void list_resume_state(const TrainerLayout& layout, VerifyReport& report) {
  const std::pair<FileRole, const char*> parts[] = {{FileRole::kOptimizer, "optimizer"},
                                                    {FileRole::kScheduler, "scheduler"},
                                                    {FileRole::kScaler, "scaler"},
                                                    {FileRole::kRng, "rng"},
                                                    {FileRole::kTrainerState, "step"}};
  for (const auto& [role, part] : parts) {
    for (const LayoutFile* f : layout.all(role)) report.resume_state.push_back({part, f->name});
  }
}

// A run of several processes saves one RNG file per process (rng_state_<r>.pth, random_states_<r>.pkl):
// each rank found, up to the highest one present or DeepSpeed's dp_world_size, must be there, or that
// process resumes with fresh random state (the Trainer logs "Didn't find an RNG file for process r").
void warn_missing_rng_ranks(const TrainerLayout& layout, int world, VerifyReport& report) {
  std::vector<int> ranks;
  for (const LayoutFile* f : layout.all(FileRole::kRng)) {
    if (f->rank >= 0) ranks.push_back(f->rank);
  }
  if (ranks.empty()) return;  // one process's rng_state.pth, or none: said elsewhere
  const int expected = std::max(world, *std::max_element(ranks.begin(), ranks.end()) + 1);
  std::string missing;
  for (int r = 0; r < expected; ++r) {
    if (std::find(ranks.begin(), ranks.end(), r) != ranks.end()) continue;
    missing += (missing.empty() ? "" : ", ") + (layout.kind == TrainerLayoutKind::kAccelerate
                                                    ? "random_states_" + std::to_string(r) + ".pkl"
                                                    : "rng_state_" + std::to_string(r) + ".pth");
  }
  if (missing.empty()) return;
  report.add_warning(
      verify_code::kRngStateMissing, "", "",
      layout.dir + ": no " + missing + " of the " + std::to_string(expected) +
          " processes' RNG files: those processes resume with fresh random state, so their data "
          "order and dropout differ from an uninterrupted run");
}

// Every rank's ZeRO optimizer partition that load_checkpoint reads, and their coverage of the model.
void check_deepspeed_ranks(const std::string& dir, int world, const std::vector<int>& optim_ranks,
                           const ZeroPartitions& zero, VerifyReport& report) {
  if (world > 0 && static_cast<int>(optim_ranks.size()) == world) zero.check(world, dir, report);
  for (int r = 0; r < world && !optim_ranks.empty(); ++r) {
    if (std::find(optim_ranks.begin(), optim_ranks.end(), r) == optim_ranks.end())
      report.add_error(verify_code::kOptimizerStateMissing, "", "",
                       dir + ": no zero_pp_rank_" + std::to_string(r) +
                           "_mp_rank_*_optim_states.pt: the model states say dp_world_size " +
                           std::to_string(world) + ", and load_checkpoint reads every rank's partition");
  }
}

// An FSDP SHARDED_STATE_DICT folder (pytorch_model_fsdp_<i>/, optimizer_<i>/): DCP's own checks,
// every item read, its findings named under the folder. It holds one part of the state, so DCP's
// resume-state rule (an optimizer beside the model) is the trainer folder's to judge, not its own.
void check_dcp_part(const TrainerLayout& layout, const LayoutFile& f, const VerifyOptions& options,
                    VerifyReport& report) {
  VerifyOptions part = options;
  part.weights_only = true;
  VerifyReport found = verify_dcp_dir(layout.dir + "/" + f.name, part);
  for (VerifyIssue& e : found.errors) {
    e.shard = e.shard.empty() ? f.name : f.name + "/" + e.shard;
    report.errors.push_back(std::move(e));
  }
  for (VerifyIssue& w : found.warnings) {
    w.shard = w.shard.empty() ? f.name : f.name + "/" + w.shard;
    report.warnings.push_back(std::move(w));
  }
  for (AcceptedGlobal& a : found.accepted_globals) report.add_accepted_global(std::move(a));
  report.shards += found.shards;
  report.tensors += found.tensors;
  report.bytes_hashed += found.bytes_hashed;
  report.file_roles[f.name] = std::string(file_role_name(f.role)) + " (FSDP sharded, a DCP folder), which " +
                              trainer_layout_name(layout.kind) + " loads on resume";
}

}  // namespace

void check_state_steps(const TensorFile& file, VerifyReport& report, bool judge) {
  const nlohmann::json& m = file.metadata();
  const nlohmann::json& root = m.contains("value") && m["value"].is_object() ? m["value"] : m;
  const std::optional<double> step = step_of(m);  // the step diff and convert read too
  const auto epoch_it = root.find("epoch");
  const std::optional<double> epoch = epoch_it != root.end() && epoch_it->is_number()
                                          ? std::optional<double>(epoch_it->get<double>())
                                          : std::nullopt;
  if (step) report.step = static_cast<int64_t>(*step);
  if (!step || !judge) return;
  const std::optional<double> opt = optimizer_step(file);
  std::optional<double> sched;
  {
    std::vector<std::pair<std::string, nlohmann::json>> found;
    find_values(m, "", "last_epoch", found);
    for (const auto& [path, v] : found) {
      if (v.is_number()) {
        sched = v.get<double>();
        break;
      }
    }
  }
  const std::string file_name = base_name(file.path());
  const std::string s = number_text(*step);
  if (opt && *opt > *step) {
    report.add_error(verify_code::kStepDisagreement, file_name, "",
                     file.path() + ": the optimizer took " + number_text(*opt) +
                         " steps but the state says step " + s +
                         ": optimizer state from a later step than the rest");
  }
  if (!sched || *sched == *step || (epoch && *sched == *epoch)) return;
  if (*sched > *step || (opt && *opt == *step)) {
    report.add_error(verify_code::kStepDisagreement, file_name, "",
                     file.path() + ": the scheduler's last_epoch is " + number_text(*sched) +
                         " but the state says step " + s +
                         (opt ? " and the optimizer took " + number_text(*opt) + " steps" : std::string()) +
                         ": a resume would continue the learning-rate schedule from another step");
  } else {
    report.add_warning(verify_code::kStepDisagreement, file_name, "",
                       file.path() + ": the scheduler's last_epoch is " + number_text(*sched) +
                           ", the step " + s +
                           ": they agree only if the scheduler steps per epoch or every few steps");
  }
}

bool is_zero3_placeholder_states(const TensorFile& file, std::string* why) {
  // DeepSpeed's model states: its version, or the param_shapes (flattened under "param_shapes.*"
  // when a pickle reader lists them per group) that ZeRO's reassembly needs.
  const nlohmann::json& m = file.metadata();
  bool deepspeed = m.contains("ds_version");
  for (auto it = m.begin(); it != m.end() && !deepspeed; ++it)
    deepspeed = starts_with(it.key(), "param_shapes");
  if (!deepspeed) return false;
  size_t params = 0, empty = 0;
  for (const ChunkInfo& c : file.chunks()) {
    if (!starts_with(c.name, "module.")) continue;
    ++params;
    if (c.data_bytes == 0) ++empty;
  }
  if (params == 0 || empty == 0) return false;
  if (why) {
    *why = std::to_string(empty) + " of its " + std::to_string(params) +
           " module tensors are empty ZeRO-3 placeholders: the weights live in the "
           "zero_pp_rank_*_optim_states.pt fp32 partitions beside it";
  }
  return empty * 2 > params;  // buffers stay whole; the parameters are the placeholders
}

VerifyReport verify_trainer_folder(const TrainerLayout& layout, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report;
  report.path = layout.dir;
  Steps steps;
  std::map<FileRole, std::unique_ptr<TensorFile>> first;  // the first opened file of each role
  std::vector<int> optim_ranks;
  std::optional<double> dp_world;
  ZeroPartitions zero;
  bool tag_named = false;  // the step in a DeepSpeed tag folder's name (global_step10), added once
  Steps ds_stages;         // the ZeRO stage each DeepSpeed file says it was saved under
  bool accelerate_step_named = false;  // one random_states_<r>.pkl's step joins the agreement
  for (const LayoutFile& f : layout.files) {
    const std::string path = layout.dir + "/" + f.name;
    if (!path_resolves_inside(layout.dir, path)) {
      // A link out of the folder: what it holds changes with the folder's place (seal refuses it too).
      report.add_error(verify_code::kShardPathUnsafe, f.name, "",
                       path +
                           ": resolves outside the checkpoint folder (a symlink leaving it, or a dangling "
                           "one): the checkpoint is not the folder's own bytes");
      continue;
    }
    if (f.role == FileRole::kTrainerState) {
      // read_json_file: a hostile nesting is refused before it is parsed (base/json_fields.h).
      const Result<nlohmann::json> read = read_json_file(path, kMaxTrainerJsonBytes);
      if (!read.is_ok() || !read->is_object()) {
        report.add_error(verify_code::kShardUnreadable, f.name, "",
                         read.is_ok() ? path + ": not a JSON object" : read.status().message());
        continue;
      }
      const nlohmann::json& j = *read;
      // TrainerState(**json): a missing global_step is 0, so the Trainer would resume from step 0
      // with the optimizer and scheduler of another step; a non-integer one breaks its arithmetic.
      const auto gs = j.find("global_step");
      if (gs == j.end() || !gs->is_number_integer() || gs->get<double>() < 0 || gs->get<double>() > 9.2e18) {
        report.add_error(verify_code::kStepStateMissing, f.name, "",
                         path + ": global_step is " + (gs == j.end() ? "missing" : "'" + gs->dump() + "'") +
                             ", expected a non-negative integer: TrainerState.load_from_json would resume "
                             "from step 0 (or fail) while the rest of the folder is at another step");
        continue;
      }
      steps.add("trainer_state.json global_step", gs->get<double>());
      report.step = gs->get<int64_t>();
      continue;
    }
    if (f.role == FileRole::kConfig && ends_with(f.name, ".json")) {
      // config.json (PretrainedConfig.from_json_file), adapter_config.json (PEFT), an index: read
      // on resume or by from_pretrained, so text that is no JSON object breaks them.
      const Result<nlohmann::json> read = read_json_file(path, kMaxTrainerJsonBytes);
      if (!read.is_ok() || !read->is_object())
        report.add_error(verify_code::kShardUnreadable, f.name, "",
                         (read.is_ok() ? path + ": not a JSON object" : read.status().message()) +
                             ": the trainer's resume (or from_pretrained) reads it");
      continue;
    }
    if (f.role == FileRole::kConfig || f.role == FileRole::kLatestTag) continue;
    if (f.loader == kDcpLoader) {
      check_dcp_part(layout, f, options, report);
      continue;
    }
    auto sniffed = sniff_tensor_file_format(path);
    const bool tensor_file = sniffed.is_ok() && *sniffed != TensorFileFormat::kUnknown;
    if (!tensor_file && f.role == FileRole::kOther) continue;  // a README, zero_to_fp32.py
    auto file = open_tensor_file(path);
    if (!file.is_ok()) {
      report.add_error(unreadable_verify_code(file.status()), f.name, "", file.status().message());
      continue;
    }
    ++report.shards;
    report.tensors += (*file)->chunks().size();
    report.file_roles[f.name] = std::string(file_role_name(f.role)) + " file, which " +
                                trainer_layout_name(layout.kind) +
                                (f.loaded_on_resume ? " loads on resume" : " never loads on resume");
    if (f.role == FileRole::kTrainingArgs) {
      warn_not_loaded(**file, f, layout, options, report);
      continue;
    }
    check_tensor_file(**file, f.name, options, report, loader_for(layout, f));
    std::string why;
    const bool deepspeed = read_by_deepspeed(layout, f);
    if (f.role == FileRole::kModel && deepspeed) {
      if (!dp_world) dp_world = number_at(**file, "dp_world_size");
      const std::optional<double> global_steps = number_at(**file, "global_steps");
      steps.add(f.name + " global_steps", global_steps);
      if (report.step < 0 && global_steps) report.step = static_cast<int64_t>(*global_steps);
      steps.add(f.name + " lr_scheduler last_epoch", number_at(**file, "last_epoch"));
      const std::string tag = f.name.find('/') == std::string::npos ? "" : parent_dir(f.name);
      const long long tag_step = layout_step_from_dir_name(tag);
      if (tag_step >= 0 && !tag_named) steps.add("the tag folder " + tag, static_cast<double>(tag_step));
      tag_named = tag_named || tag_step >= 0;
    }
    if (f.role == FileRole::kOptimizer && f.rank >= 0) {
      optim_ranks.push_back(f.rank);
      zero.add_partitions(**file);
    }
    if (deepspeed) {
      // The ZeRO stage each file was saved under: its ds_config's, and for optimizer states the
      // partitions it holds (stage 3's fp32_flat_groups, stage 1/2's single_partition_of_fp32_groups).
      if (auto stage = number_at(**file, "zero_optimization.stage"))
        ds_stages.add(f.name + " ds_config stage", stage);
      const std::string held = zero_partition_kind(**file);
      if (!held.empty()) ds_stages.add(f.name + " partitions of stage " + held, held == "3" ? 3.0 : 2.0);
    }
    if (f.role == FileRole::kModel && deepspeed && zero.param_shapes.is_null())
      zero.param_shapes = (*file)->metadata().value("param_shapes", nlohmann::json());
    if (f.role == FileRole::kScheduler) steps.add(f.name + " last_epoch", number_at(**file, "last_epoch"));
    if (f.role == FileRole::kRng && layout.kind == TrainerLayoutKind::kAccelerate) {
      // save_state's random_states_<r>.pkl records the step it was saved at.
      const std::optional<double> at = number_at(**file, "step");
      if (!accelerate_step_named) steps.add(f.name + " step", at);
      accelerate_step_named = accelerate_step_named || at.has_value();
      if (report.step < 0 && at) report.step = static_cast<int64_t>(*at);
    }
    if (f.role == FileRole::kOptimizer && !deepspeed) steps.add(f.name + " step", number_at(**file, "step"));
    if (!first.count(f.role)) first[f.role] = std::move(*file);
  }
  // The folder's own number (checkpoint-10, global_step10) is the step its trainer saved.
  const long long named = layout_step_from_dir_name(base_name(layout.dir));
  if (named >= 0 && layout.kind != TrainerLayoutKind::kAccelerate)
    steps.add("the folder name " + base_name(layout.dir), static_cast<double>(named));
  if (!options.weights_only) check_steps(steps, report);
  check_zero_stages(ds_stages, layout.dir, report);

  const std::string dir = layout.dir;
  const bool model = layout.find(FileRole::kModel) != nullptr;
  const int world = dp_world ? static_cast<int>(*dp_world) : 0;
  if (!options.weights_only) warn_missing_rng_ranks(layout, world, report);
  if (layout.under_deepspeed()) {
    // The Trainer or save_state under DeepSpeed: load_checkpoint reads the model and the optimizer
    // from the tag folder `latest` names; scheduler.pt / scheduler.bin only when DeepSpeed does not
    // hold the scheduler itself.
    bool states = false;
    for (const LayoutFile& f : layout.files)
      states = states || (f.role == FileRole::kModel && f.loader == kDeepSpeedLoader);
    need(report, states, verify_code::kShardMissing,
         dir +
             ": `latest` names a tag folder without mp_rank_*_model_states.pt: DeepSpeed's load_checkpoint "
             "reads the model from it");
    if (!options.weights_only) check_deepspeed_ranks(dir, world, optim_ranks, zero, report);
    if (!options.weights_only && layout.kind == TrainerLayoutKind::kHfTrainer)
      need(
          report, layout.find(FileRole::kTrainerState), verify_code::kStepStateMissing,
          dir + ": trainer_state.json is missing: the Trainer reads the step, epoch and log history from it");
    if (!options.weights_only && !layout.find(FileRole::kRng))
      report.add_warning(verify_code::kRngStateMissing, "", "",
                         dir + ": no RNG state file: the run resumes with fresh random state");
    list_resume_state(layout, report);
    report.seconds = seconds_since(start);
    return report;
  }
  switch (layout.kind) {
    case TrainerLayoutKind::kHfTrainer: {
      check_fsdp_index_zero(layout, options, report);
      need(report, model, verify_code::kShardMissing,
           dir +
               ": no model weights (model.safetensors, pytorch_model.bin, their shards, adapter_model.* "
               "for PEFT, or FSDP's pytorch_model_fsdp*): the Trainer's resume loads the model from here");
      if (options.weights_only) break;
      const bool optimizer = layout.find(FileRole::kOptimizer), scheduler = layout.find(FileRole::kScheduler);
      if (!optimizer && !scheduler) {
        report.add_error(
            verify_code::kOptimizerStateMissing, "", "",
            dir +
                ": no optimizer.pt or scheduler.pt: what save_only_model=True writes; the Trainer "
                "would resume the weights with a fresh optimizer and learning-rate schedule "
                "(pass --weights-only to check the weights alone)");
      } else if (!optimizer || !scheduler) {
        report.add_error(
            optimizer ? verify_code::kSchedulerStateMissing : verify_code::kOptimizerStateMissing, "", "",
            dir + ": " + (optimizer ? "scheduler.pt" : "optimizer.pt") +
                " is missing, and the Trainer loads optimizer.pt and scheduler.pt only together: "
                "neither would be resumed");
      }
      need(
          report, layout.find(FileRole::kTrainerState), verify_code::kStepStateMissing,
          dir + ": trainer_state.json is missing: the Trainer reads the step, epoch and log history from it");
      if (!layout.find(FileRole::kRng))
        report.add_warning(verify_code::kRngStateMissing, "", "",
                           dir +
                               ": no rng_state*.pth: the Trainer resumes with fresh random state (it logs "
                               "\"Didn't find an RNG file\"), so data order and dropout differ from an "
                               "uninterrupted run");
      break;
    }
    case TrainerLayoutKind::kAccelerate: {
      need(report, model, verify_code::kShardMissing,
           dir + ": no model weights (model*.safetensors, pytorch_model*.bin): load_state loads them first");
      if (options.weights_only) break;
      need(report, layout.find(FileRole::kOptimizer), verify_code::kOptimizerStateMissing,
           dir + ": no optimizer*.bin: load_state would resume the weights with a fresh optimizer");
      if (!layout.find(FileRole::kRng))
        report.add_warning(verify_code::kRngStateMissing, "", "",
                           dir + ": no random_states_<rank>.pkl: load_state resumes with fresh random state");
      break;
    }
    case TrainerLayoutKind::kDeepSpeed: {
      need(report, model, verify_code::kShardMissing,
           dir +
               ": no mp_rank_*_model_states.pt or zero_pp_rank_*_model_states.pt: load_checkpoint reads "
               "the model from it");
      if (options.weights_only && !layout.all(FileRole::kModel).empty()) {
        std::string why;
        const auto it = first.find(FileRole::kModel);
        if (it != first.end() && is_zero3_placeholder_states(*it->second, &why) && optim_ranks.empty())
          report.add_error(verify_code::kZeroPlaceholdersOnly, it->second->path(), "",
                           it->second->path() + ": " + why);
      }
      if (options.weights_only) break;
      check_deepspeed_ranks(dir, world, optim_ranks, zero, report);
      break;
    }
  }
  list_resume_state(layout, report);
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace ckpt

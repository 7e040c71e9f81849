// A checkpoint layout: one way a checkpoint lies on disk (ckptcheck's own step folders, one tensor
// file, a sharded index, a DCP folder, a trainer's folder, ...), in one file under layouts/, listed
// in layouts/layout_registry.cpp. A layout says from evidence (names, first bytes) whether a path is
// one of its checkpoints, which folder that checkpoint is, each file's role and the loader that
// reads it, what a resume reads, and which byte ranges its seal covers.
//
// Invariant: detection is exclusive. A path that two layouts' evidence claims is refused
// (layouts/layout_registry.h), so where one layout must yield to another the rule is written in the
// yielding layout's evidence ("no manifest.json"), never in the order layouts are tried.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

enum class FileRole {
  kModel,         // weights (safetensors, .bin, adapters), or DeepSpeed's model states
  kOptimizer,     // optimizer.pt / optimizer*.bin, or DeepSpeed's ZeRO optimizer states
  kScheduler,     // scheduler.pt / scheduler*.bin
  kScaler,        // scaler.pt
  kRng,           // rng_state*.pth, random_states_<r>.pkl
  kTrainerState,  // trainer_state.json
  kTrainingArgs,  // training_args.bin: a pickle of the arguments, never loaded on resume
  kCustomState,  // custom_checkpoint_<i>.pkl, sampler*.bin, Megatron's common.pt: loaded (weights_only=False)
  kConfig,       // config.json, adapter_config.json, generation_config.json, *.index.json
  kLatestTag,    // DeepSpeed's or ckptcheck's `latest`
  kManifest,     // what places every piece: ckptcheck's manifest.json, DCP's .metadata
  kShard,        // a piece of the whole state that the manifest places: native shards, *.distcp
  kSeal,         // ckptcheck.seal.json, integrity.json: hashes written after the save
  kOther,        // anything else: listed, checked if it is a tensor file
};
const char* file_role_name(FileRole role);

struct LayoutFile {
  std::string name;  // relative to the checkpoint's folder (LayoutMatch::dir; a lone file: its name)
  FileRole role = FileRole::kOther;
  bool loaded_on_resume = false;
  int rank = -1;       // rng_state_<r>, random_states_<r>, zero_pp_rank_<r>: the rank; -1 otherwise
  std::string loader;  // what reads it: "torch.load", "safetensors", "json", ... (file_loader_by_name)
};

// The loader that reads a file of this name in the layouts that do not sniff it: what the name's
// extension tells ("safetensors" for .safetensors, "json" for .json, "torch.load" otherwise).
std::string file_loader_by_name(const std::string& name);

// The regular files directly in `dir` (no subfolder's), by name: what a folder layout lists.
std::vector<std::string> files_directly_in(const std::string& dir);
// The first of `names` that is a regular file in `dir`, "" when none: a folder layout's evidence.
template <typename Names>
std::string first_file_present(const std::string& dir, const Names& names);

// A folder holding ckptcheck's manifest.json, or named like its step folders (step_00000008): the
// native checkpoint layout's, which every other folder layout's evidence excludes (verify took
// these as ckptcheck's before any other rule, and still does).
bool is_native_step_folder(const std::string& dir);

// One layout's claim on a path.
struct LayoutMatch {
  std::string layout;    // the registered layout ("native_checkpoint", "single_file", "dcp", ...)
  std::string kind;      // what verify reports (verifier/check/checkpoint_kind.h): "ckptcheck",
                         // "torch_save", "hf_trainer", ...
  std::string evidence;  // what made the claim: "manifest.json", "trainer_state.json", "zip + data.pkl"
  std::string dir;       // the checkpoint: its folder, or the file itself (a root: the step it names)
  std::string given;     // the path passed, when the checkpoint was found from above it; "" otherwise
  std::vector<LayoutFile> files;
  // The layout is certain the path is its own, but it is broken in a way no reader can get past
  // (DeepSpeed's `latest` naming a missing folder, a root with no committed step): readers return
  // this; verify reports it under the layout's kind.
  Status defect;
};

class Layout {
 public:
  virtual ~Layout() = default;
  virtual const char* name() const = 0;
  // What the evidence is and what it excludes, one line, for docs and `--help`-like listings.
  virtual const char* evidence_rule() const = 0;
  // What its owner's resume reads (or "not resumable": weights only).
  virtual const char* resume_rule() const = 0;
  // The byte ranges a seal of it covers (verifier/check/seal.h computes them).
  virtual const char* seal_ranges() const = 0;
  // The file or folder a seal of this checkpoint covers, and beside which verify looks for one: by
  // default the path the user passed (the checkpoint, or the folder it was found from).
  virtual std::string seal_subject(const LayoutMatch& match) const {
    return match.given.empty() ? match.dir : match.given;
  }
  // `path` has no trailing slash. nullopt: no evidence of this layout.
  virtual std::optional<LayoutMatch> detect(const std::string& path) const = 0;

 protected:
  // This layout's claim on the checkpoint at `dir`, of `kind`, made from `evidence`; files to add.
  LayoutMatch claim(const std::string& kind, const std::string& evidence, const std::string& dir) const {
    LayoutMatch m;
    m.layout = name();
    m.kind = kind;
    m.evidence = evidence;
    m.dir = dir;
    return m;
  }
};

bool is_regular_file_in(const std::string& dir, const std::string& name);

template <typename Names>
std::string first_file_present(const std::string& dir, const Names& names) {
  for (const auto& name : names) {
    if (is_regular_file_in(dir, name)) return name;
  }
  return "";
}

}  // namespace ckpt

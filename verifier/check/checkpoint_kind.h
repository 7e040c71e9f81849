// One verify interface for every kind of checkpoint. `verify PATH` first says what PATH is, then
// refuses any option that kind cannot honour (exit 2, naming the option and the kind: a gate that
// silently drops `--pubkey` or `--against-env` could be walked past), then runs the kind's checks and,
// where a seal covers the checkpoint, the seal's hashes and signature beside them.
//
// What each option means for every kind:
//   --jobs N         tensors (foreign kinds), shards or sealed pieces read on N threads; the report
//                    is the same for any N.
//   --quick          no payload byte is read: structure, headers, pickles and the pickle gate, resume
//                    state, sizes; a seal's own digest and signature, every sealed file's size.
//   --pubkey K       a signature must verify under K: manifest.json.sig for ckptcheck's own
//                    checkpoints, <seal>.sig for every other kind. A kind without a seal fails
//                    (signature_missing), never passes with a warning.
//   --weights-only   foreign kinds may hold model weights alone; refused for ckptcheck's own
//                    checkpoints, whose manifest always lists the whole training state.
//   --allow-global   pickle globals the user reviewed (also --allow-globals-from FILE, merged into
//                    the same list by the CLI); refused for kinds that hold no pickle. Each kind's
//                    own classes need no flag: verifier/check/pickle_trust_profile.h.
//   --against-env    only ckptcheck's own checkpoints carry pins; refused for every other kind.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "layouts/layout.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {

enum class CheckpointKind {
  kCkptcheck,          // a step dir with manifest.json (or a root / `latest` naming one)
  kCkptcheckShard,     // one native shard file on its own
  kDcp,                // a PyTorch Distributed Checkpoint directory (.metadata + .distcp)
  kMegatronTorchDist,  // Megatron-Core torch_dist: DCP plus metadata.json and common.pt
  kTorchSave,          // a torch.save zip (.pt, .bin, Lightning .ckpt)
  kTorchSaveLegacy,    // a pre-1.6 torch.save stream
  kTorchScript,        // a torch.jit.save archive (TorchScript code, data.pkl, constants.pkl)
  kPickle,             // a plain pickle: torch.load and pickle.load run it (torch.load then raises)
  kNumpy,              // numpy.save's .npy (an object array's pickle runs under allow_pickle=True)
  kKeras,              // a Keras 3 .keras archive (config.json, model.weights.h5)
  kSafetensors,        // one .safetensors file
  kSafetensorsIndex,   // a sharded model's *.safetensors.index.json and the files it names
  kHdf5,               // an HDF5 file (our shards, Keras weights)
  kHfTrainer,          // an HF Trainer checkpoint-N/ (or the run dir above it): layouts/trainer_layout.h
  kAccelerate,         // an Accelerate save_state folder
  kDeepSpeed,          // a DeepSpeed checkpoint: `latest` and global_stepN/, or a tag folder
  kModelFolder,        // a Hugging Face model folder (weights, config, a sharded index)
  kSealedDirectory,    // a directory of other files that only its seal describes
  kUnknownFile,        // a file no reader recognises (verify reports it unreadable)
  kAmbiguous,          // a path two layouts claim (layouts/layout_registry.h): refused, reading_ambiguous
};

const char* checkpoint_kind_name(CheckpointKind kind);  // "ckptcheck", "dcp", "torch_save", ...

// Whether checkpoints of this kind can hold a pickle (torch.save files, DCP, folders holding them).
bool kind_holds_pickles(CheckpointKind kind);

// The path whose seal covers the checkpoint at `path`, as the registry's layout for it says
// (Layout::seal_subject): the path itself, or for a sharded index the folder holding it and its
// shards. `seal` and verify both ask it, so a seal is written where verify looks. kAmbiguous when two
// layouts claim the path (which one's files a seal should cover is what is unknown); a layout's
// defect (DeepSpeed's `latest` naming nothing) as the layout words it. A path no layout claims is
// its own subject: any folder or file can be sealed.
Result<std::string> resolve_seal_subject(const std::string& path);
// resolve_seal_subject, or `path` itself where that fails (verify reports the ambiguity or defect).
std::string seal_subject(const std::string& path);
// The seal subject of a checkpoint the registry already matched at `path`.
std::string seal_subject_of(const LayoutMatch& match, const std::string& path);

// What `path` (a checkpoint dir, a root or `latest`, a sealed or foreign dir, or a file) is: the kind
// of the one registered layout that claims it (layouts/layout_registry.h), kAmbiguous when two do;
// a directory no layout claims is kSealedDirectory (verify resolves it as a root, or fails), a file
// kUnknownFile. Files are told apart by their first bytes, not their names.
CheckpointKind detect_checkpoint_kind(const std::string& path);
// The kind a layout reports (LayoutMatch::kind); kUnknownFile for a name no kind has.
CheckpointKind checkpoint_kind_named(const std::string& name);

// What `verify PATH` checks: `latest` and a root resolved to the committed checkpoint they name,
// with its kind (kAmbiguous, for verify to report, when two layouts claim PATH). kNotFound /
// kIoError when PATH names no checkpoint.
struct VerifyTarget {
  std::string path;
  CheckpointKind kind = CheckpointKind::kUnknownFile;
  // The registry's one detection (absent for a path no layout claims), kept so no reader detects
  // again; for kAmbiguous, `refusal` is the registry's message naming both layouts.
  std::optional<LayoutMatch> match;
  Status refusal;
};
Result<VerifyTarget> resolve_verify_target(const std::string& path);

// kInvalidArgument naming the option and the kind when `options` asks for something `kind` cannot
// do (the table above).
Status refuse_unhonoured_options(CheckpointKind kind, const VerifyOptions& options);

}  // namespace ckpt

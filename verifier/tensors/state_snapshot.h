// The training state a program saved, read back for comparison, whatever it wrote: a checkpoint
// this tool committed, one tensor file (torch.save, safetensors, HDF5, native), or a directory of
// such files (`model.pt`, `optimizer.pt`, `scheduler.pt`, `trainer_state.json`...). Nothing from
// the files is executed (torch.save pickles go through the restricted reader).
//
// Components, which the drill reports divergence by: the checkpoint's own component for a
// committed checkpoint; a file's top-level key inside a single file ("optimizer.state.0.exp_avg"
// -> "optimizer"); the file's stem inside a directory ("optimizer.pt" -> "optimizer"), with its
// subdirectory when it is in one ("rank1/state.pt" -> "rank1/state"; links are not followed).
//
// A committed checkpoint's tensors are checked whole when the snapshot is taken (every chunk hashed
// against its records) but not held: the comparison reads again only the tensors whose digests
// differ from the other side's (snapshot_tensor.h). Any other file's tensors are held.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/py_value.h"
#include "verifier/tensors/snapshot_tensor.h"
#include "verifier/tensors/state_compare.h"

namespace ckpt {

struct SnapshotValue {
  std::string component;
  nlohmann::json value;  // a non-tensor leaf: a step count, a scheduler's last_epoch, a scaler's scale
  // The same leaf typed (formats/py_value.h), what comparisons use; null: `value` read as json.load.
  PyValuePtr typed;
};

struct StateSnapshot {
  std::string path;
  std::vector<SnapshotTensor> tensors;
  std::map<std::string, SnapshotValue> values;
  // Files of a directory that no reader understood, "name: why": reported, never skipped silently.
  std::vector<std::string> unreadable;
};

// Reads every tensor and non-tensor leaf; refuses more than `max_bytes` of tensor data in total.
Result<StateSnapshot> read_state_snapshot(const std::string& path, uint64_t max_bytes = 8ull << 30);

// The drill's comparison of two states: tensor by tensor by name (compare_snapshot_tensors), folded
// per component (the reference's component name wins), plus every non-tensor leaf: numbers within
// the tolerance, anything else equal as JSON. A leaf or tensor on one side only fails its component
// (one_side_only).
std::map<std::string, ComponentDiff> compare_snapshots(const StateSnapshot& reference,
                                                       const StateSnapshot& resumed,
                                                       const Tolerance& tolerance);

}  // namespace ckpt

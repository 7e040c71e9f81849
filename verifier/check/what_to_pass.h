// What to pass instead, when a path handed to `verify` or `inspect` names no checkpoint: the
// folder above the checkpoints (a run dir holding its checkpoint root, a folder of `step_N.pt`
// files), or one file of a checkpoint directory (its manifest.json). The user is told what was
// found and the command line that would work, instead of "no committed checkpoint" or "not a
// tensor file" alone.
#pragma once

#include <string>

#include "base/status.h"

namespace ckpt {

// For a directory: "it holds, one level down: a checkpoint root (run1, latest step_00000008); 3
// torch_save files (step_2.pt, step_4.pt, step_6.pt): pass one of them, e.g. `ckptcheck verify
// DIR/step_6.pt`". For a file inside a checkpoint directory: "it is a file of the ckptcheck
// checkpoint DIR: pass the directory, `ckptcheck verify DIR`". "" when there is nothing to suggest.
// `command` names the command in the example ("verify", "inspect").
std::string what_to_pass_instead(const std::string& path, const std::string& command);

// `status` with what_to_pass_instead(path) appended when `status` says `path` names no checkpoint
// (kNotFound, kIoError, kNotSupported) and there is something to suggest; unchanged otherwise.
Status with_what_to_pass(const std::string& path, const std::string& command, const Status& status);

}  // namespace ckpt

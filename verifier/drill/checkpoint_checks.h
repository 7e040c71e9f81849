// The checks a drill runs on the checkpoint a relaunch is about to use: `ckptcheck verify` in a
// child (checkpoints ckptcheck wrote: every hash) and the readers `inspect` and `diff` use (any
// checkpoint: a file they cannot read is reported, never skipped). A checkpoint that fails is not
// resumed: the drill has its answer.
#pragma once

#include <string>

#include "base/status.h"
#include "verifier/drill/drill_record.h"

namespace ckpt {

// Runs `EXE verify CHECKPOINT --json` (logs in `log_dir`) and records a "verify" check naming the
// shard and the components it holds when it fails; adds verify's time to *seconds. False when
// verify rejects it; an error when verify gave no result.
Result<bool> verify_in_child(DrillRecord& record, const std::string& exe, const std::string& checkpoint,
                             const std::string& log_dir, const std::string& mode, double timeout_seconds,
                             double* seconds);

// Reads every tensor and value of the checkpoint and records a "checkpoint_readable" check.
bool check_readable(DrillRecord& record, const std::string& checkpoint, const std::string& mode);

// The resume-state judgement `verify` makes (verifier/check/resume_state.h), on the checkpoint a
// relaunch resumes from: a "resume_state" check that is a warning (never a failure: the comparison
// judges the resume) listing each *_state_missing finding, e.g. optimizer_state_missing, with its
// message. Only for checkpoints ckptcheck did not write (its own name every component). The
// report's headline (drill_headline) names a missing state as the cause of a failed drill.
void check_resume_state(DrillRecord& record, const std::string& checkpoint, const std::string& mode);

}  // namespace ckpt

// The nightly restore drill of a run already going (`drill --live RUN_METRICS -- PROGRAM`). A 30-day
// run cannot be rerun from step 0 beside the drill, so its own contract log and checkpoints are the
// golden values (as Megatron-LM's and NeMo's resume tests compare with recorded "golden values"):
//
//   snapshot   the newest announced checkpoint still on disk (or --checkpoint), hard linked into
//              the work dir at once, before the run's retention deletes it, and checked unchanged
//   read       the snapshot through the readers (and `verify` for checkpoints ckptcheck wrote)
//   resumed    PROGRAM in a fresh process from the snapshot to step N+K, with a scratch checkpoint
//              dir and metrics file; --control resumes twice to measure the noise
//   wait       until the live log reaches N+K (bounded by --wait-timeout); a log that stops
//              changing for the stall time (live_stall.h) is a run that crashed or stopped
//   compare    every metric at N+1..N+K with the live log; the live run's own step-N+K checkpoint,
//              when it announced one that is still there, tensor by tensor
//   faults     --faults on copies of the snapshot
//
// The live run's directory and log are only ever read: nothing is written, renamed or locked there.
#pragma once

#include "verifier/drill/drill.h"

namespace ckpt {

class Progress;

DrillOutcome run_live_drill(const DrillOptions& options, Progress* progress);

}  // namespace ckpt

// The exit code a task ends with when its launcher terminates it after the verdict is known.
//
// srun --kill-on-bad-exit (and mpirun) end the other tasks of a step as soon as one exits nonzero.
// In `verify --distributed` every task reaches the same verdict (1: a check failed) and exits with
// it, but the first to exit got the others SIGTERMed while they were still in MPI_Finalize, and
// the step's code became 143 instead of 1: an exit code is an API
// (SlurmVerify.AByteFlippedInRankOnesShareIsReportedByRankZero failed so about 1 run in 15 under
// load).
#pragma once

namespace ckpt {

// From now on a SIGTERM ends the process with `exit_code` (stdout and stderr are flushed here,
// first), not 128 + 15. For a task whose verdict is reached, printed and agreed by every task.
void exit_with_on_termination(int exit_code);

}  // namespace ckpt

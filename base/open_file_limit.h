// The process's soft limit on open files, raised to its hard limit at start, as Go's runtime and
// systemd's services do, and put back in the programs it starts. A drill holds the checkpoints it
// compares open until the comparison is done (verifier/tensors/snapshot_tensor.h): the
// reference's, the resumed run's and the control's, a descriptor a shard each. The default soft
// limit (1,024 where the hard one is 524,288) would refuse three checkpoints of 400 shards, each of
// which opens alone.
#pragma once

#include <cstdint>

namespace ckpt {

// Raises RLIMIT_NOFILE's soft limit to its hard limit, remembering the one it found. Where that is
// refused, or the soft limit is already there, nothing changes. Returns the soft limit in force (0
// where it cannot be read). Call it before any thread starts.
uint64_t raise_open_file_limit();

// In a child about to exec a program of the user's: puts back the soft limit this process was
// started with, so that the program runs under the limits it was given (a drill does not change the
// run it drives). System calls only: safe between vfork and exec. A no-op unless it was raised.
void restore_open_file_limit();

}  // namespace ckpt

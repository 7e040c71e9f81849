// The drill's fault catalogue: every fault `drill --faults` knows, in one table. Two kinds:
//   copy     a copy of the step-N checkpoint is damaged the way storage damages files (truncated,
//            a flipped bit, a file missing, a file of an older save) and the program is relaunched
//            from it (fault_drill.h);
//   storage  the subject writes its checkpoints through ckptcheck-faultfs (docs/faultfs.md), and the
//            fault happens below the process: a power loss, a full disk, a read error
//            (storage_fault_drill.h).
#pragma once

#include <string>
#include <vector>

namespace ckpt {

enum class FaultKind { kCopy, kStorage };

struct FaultSpec {
  const char* name;  // what --faults takes
  FaultKind kind;
  const char* summary;  // one line: what the fault does
};

// Every fault, in the order --help lists them.
const std::vector<FaultSpec>& fault_catalogue();
// The entry named `name`; null when there is none.
const FaultSpec* find_fault(const std::string& name);
bool is_storage_fault(const std::string& name);
// "truncate, bitflip, drop-file, stale-file, power-loss, ..." (every name, or those of one kind).
std::string fault_names();
std::string fault_names(FaultKind kind);

}  // namespace ckpt

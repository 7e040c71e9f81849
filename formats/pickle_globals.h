// The globals a pickle names (GLOBAL / STACK_GLOBAL), and what torch.load(weights_only=False) would
// do with each. Our reader never imports or calls any of them (formats/pickle_reader.h); this is
// the list `inspect` shows so a user knows what the file would run under a real unpickler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt {

enum class PickleGlobalRisk : uint8_t {
  kSafe,       // tensor rebuild, storages, plain containers, dtype helpers: data only
  kExecutes,   // an import plus a call or constructor that torch.load(weights_only=False) would run
  kDangerous,  // runs commands, evaluates code, opens files or unpickles more: os.system, eval, ...
};

const char* pickle_global_risk_name(PickleGlobalRisk risk);  // "safe" | "executes" | "dangerous"
PickleGlobalRisk classify_pickle_global(const std::string& module, const std::string& name);

struct PickleGlobal {
  std::string name;  // "module.qualname", as the pickle spells it (protocol 2 writes __builtin__)
  PickleGlobalRisk risk = PickleGlobalRisk::kExecutes;
  uint64_t first_offset = 0;  // of the first opcode naming it, in the pickle's bytes
  uint64_t count = 0;         // how many opcodes name it
};

}  // namespace ckpt

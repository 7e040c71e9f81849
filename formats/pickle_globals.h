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

// Whether torch.load(weights_only=True) resolves `module.name`: the union of the default allowlists
// of PyTorch 1.13 (the LibTorch Debian ships, which our pins name) and PyTorch 2.x
// (torch/_weights_only_unpickler.py, _get_allowed_globals and _tensor_rebuild_functions): tensor and
// storage classes, dtypes, the tensor rebuild functions, torch.Size / device, OrderedDict, Counter,
// and the data-only builtins protocol 2 needs (_codecs.encode, set, bytearray, complex). Protocol 2's
// Python 2 names (__builtin__) are mapped as the unpickler maps them. numpy's globals are not in it:
// PyTorch refuses them too unless the user adds them. `verify` refuses every global outside this set
// (verifier/check/pickle_gate.h); `inspect` lists them.
bool torch_weights_only_allows(const std::string& module, const std::string& name);
// What torch.load(weights_only=False) would do with the global, for messages: "import posix and
// call system: runs commands, evaluates code or opens files".
std::string pickle_global_effect(const std::string& full_name, PickleGlobalRisk risk);

struct PickleGlobal {
  std::string name;  // "module.qualname", as the pickle spells it (protocol 2 writes __builtin__)
  PickleGlobalRisk risk = PickleGlobalRisk::kExecutes;
  uint64_t first_offset = 0;  // of the first opcode naming it, in the pickle's bytes
  uint64_t count = 0;         // how many opcodes name it
  // Which pickle names it, for messages: "archive/data.pkl" (a zip member), "object pickle at file
  // offset 0x3b" (legacy torch.save), ".metadata"; set by the file's reader. `first_offset` is
  // counted from that pickle's first byte.
  std::string pickle;
  // For builtins.getattr only: what each call looked up, "module.Class.ATTR", when the call was
  // getattr(<a global>, <a string>) (how Python 3.11+ pickles an enum member). A loader may accept
  // such a lookup on an enum it accepts; nothing else.
  std::vector<std::string> attribute_lookups;
  // How the pickle used the global (PickleUse bits), so that a gate can accept a class only where
  // it is used as data (verifier/check/pickle_trust_profile.h); 0 when it was only named.
  uint32_t uses = 0;
  // How many calls were none of the data patterns below (kPickleUseOtherCall); for getattr, the
  // calls that were not getattr(<a global>, <a string>).
  uint64_t other_calls = 0;
};

// The ways a pickle uses a global, as PickleGlobal::uses bits. Python's pickler writes a dataclass
// as NEWOBJ(cls, ()) then BUILD(fields), an enum member as REDUCE(cls, (value,)) (Python < 3.11)
// or getattr(cls, 'NAME') (3.11+), a pathlib path as REDUCE(cls, (part, part, ...)).
enum PickleUse : uint32_t {
  kPickleUseConstructed = 1,        // NEWOBJ(cls, ()), copyreg._reconstructor(cls, object, None)
  kPickleUseCalledWithScalar = 2,   // REDUCE(cls, (one None/bool/int/float/bytes,))
  kPickleUseCalledWithStrings = 4,  // REDUCE(cls, (str, ...)), one string or more
  kPickleUseAttributeRead = 8,      // the class in getattr(cls, 'NAME')
  kPickleUseOtherCall = 16,         // called or constructed with anything else
  // numpy's own pickling of an array: _reconstruct(ndarray, (0,), b'b') (both globals get the bit),
  // and numpy.dtype(str, bool, bool), as np.random.get_state()'s key array is written.
  kPickleUseNumpyArray = 32,
};
// What one REDUCE argument is, for the rule below: a str, a plain scalar (None, bool, int, float,
// bytes) or anything else.
enum class PickleArgShape : uint8_t { kString, kScalar, kOther };
// Which data pattern a REDUCE's arguments follow (the PickleUse bit for the called global): strings
// only (a path's parts, a str enum's value), one plain scalar (an enum member's value), or anything
// else. Both pickle readers (formats/pickle_reader.h, formats/dcp_metadata_reader.h) apply it.
uint32_t pickle_call_use(const std::vector<PickleArgShape>& args);

// "rebuilt from its fields 3x, getattr 2x", for reports: the uses, in words.
std::string pickle_uses_text(uint32_t uses);

}  // namespace ckpt

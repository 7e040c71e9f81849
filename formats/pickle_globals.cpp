#include "formats/pickle_globals.h"

#include <cstring>

namespace ckpt {

namespace {

bool in(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s == n) return true;
  }
  return false;
}

// A module, or any submodule of it.
bool under(const std::string& module, std::initializer_list<const char*> roots) {
  for (const char* r : roots) {
    const size_t n = std::strlen(r);
    if (module.compare(0, n, r) == 0 && (module.size() == n || module[n] == '.')) return true;
  }
  return false;
}

bool is_builtins(const std::string& module) {
  return module == "builtins" || module == "__builtin__";
}

}  // namespace

const char* pickle_global_risk_name(PickleGlobalRisk risk) {
  switch (risk) {
    case PickleGlobalRisk::kSafe: return "safe";
    case PickleGlobalRisk::kExecutes: return "executes";
    case PickleGlobalRisk::kDangerous: return "dangerous";
  }
  return "executes";
}

PickleGlobalRisk classify_pickle_global(const std::string& module, const std::string& name) {
  // Process, shell, code and file access, and anything that reaches them by name.
  if (under(module, {"os",         "posix",    "nt",      "subprocess",      "pty",       "runpy",
                     "importlib",  "shutil",   "socket",  "ctypes",          "sys",       "code",
                     "codeop",     "pickle",   "_pickle", "marshal",         "shelve",    "dill",
                     "webbrowser", "commands", "popen2",  "multiprocessing", "asyncio",   "signal",
                     "pdb",        "bdb",      "timeit",  "cProfile",        "profile",   "trace",
                     "tempfile",   "io",       "_io",     "zipimport",       "pkgutil",   "site",
                     "urllib",     "http",     "ftplib",  "smtplib",         "telnetlib", "types"})) {
    return PickleGlobalRisk::kDangerous;
  }
  if (is_builtins(module) &&
      in(name,
         {"eval", "exec",   "execfile",  "compile", "__import__", "getattr",    "setattr",        "delattr",
          "open", "input",  "raw_input", "globals", "locals",     "vars",       "breakpoint",     "apply",
          "file", "reload", "exit",      "quit",    "help",       "__loader__", "__build_class__"})) {
    return PickleGlobalRisk::kDangerous;
  }
  if ((module == "operator" && in(name, {"attrgetter", "methodcaller", "getitem"})) ||
      (module == "functools" && in(name, {"partial", "reduce"})) ||
      (module == "torch" && in(name, {"load", "compile"})) ||
      (module == "torch.storage" && name == "_load_from_bytes") ||
      (module == "torch.serialization" && in(name, {"load", "_load", "_legacy_load"})) ||
      under(module, {"torch.hub", "torch.jit", "torch.package"}) ||
      (under(module, {"numpy"}) && in(name, {"load", "loads", "fromfile", "runstring"}))) {
    return PickleGlobalRisk::kDangerous;
  }
  // What a tensor state dict and plain Python data are made of.
  if (module == "collections" && in(name, {"OrderedDict", "defaultdict"})) return PickleGlobalRisk::kSafe;
  if (module == "torch._utils" &&
      in(name, {"_rebuild_tensor_v2", "_rebuild_parameter", "_rebuild_parameter_with_state"})) {
    return PickleGlobalRisk::kSafe;
  }
  if ((module == "torch._tensor" && name == "_rebuild_from_type_v2") ||
      (module == "torch.serialization" && name == "_get_layout")) {
    return PickleGlobalRisk::kSafe;
  }
  if (module == "torch" && (in(name, {"Size",          "device",         "float32",
                                      "float",         "float16",        "half",
                                      "bfloat16",      "float64",        "double",
                                      "int64",         "long",           "int32",
                                      "int",           "int16",          "short",
                                      "int8",          "uint8",          "bool",
                                      "uint16",        "uint32",         "uint64",
                                      "float8_e4m3fn", "float8_e5m2",    "complex64",
                                      "complex128",    "strided",        "contiguous_format",
                                      "channels_last", "preserve_format"}) ||
                            (name.size() > 7 && name.compare(name.size() - 7, 7, "Storage") == 0))) {
    return PickleGlobalRisk::kSafe;
  }
  if ((module == "numpy.core.multiarray" || module == "numpy._core.multiarray") &&
      in(name, {"_reconstruct", "scalar"})) {
    return PickleGlobalRisk::kSafe;
  }
  if ((module == "numpy" && in(name, {"ndarray", "dtype"})) || module == "numpy.dtypes")
    return PickleGlobalRisk::kSafe;
  if (module == "_codecs" && name == "encode") return PickleGlobalRisk::kSafe;
  if (module == "copyreg" && in(name, {"_reconstructor", "__newobj__"})) return PickleGlobalRisk::kSafe;
  if (is_builtins(module) && in(name, {"set", "frozenset", "bytearray", "slice", "complex", "object", "list",
                                       "dict", "tuple", "int", "float", "str", "bytes", "bool", "range"})) {
    return PickleGlobalRisk::kSafe;
  }
  return PickleGlobalRisk::kExecutes;
}

}  // namespace ckpt

#include "formats/pickle_globals.h"

#include <cstring>
#include <utility>

#include "base/text.h"

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
  if (module == "torch._utils" && in(name, {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
                                            "_rebuild_parameter", "_rebuild_parameter_with_state"})) {
    return PickleGlobalRisk::kSafe;
  }
  if (module == "torch.storage" && name == "UntypedStorage") return PickleGlobalRisk::kSafe;  // torch >= 2.1
  if ((module == "torch._tensor" && name == "_rebuild_from_type_v2") ||
      (module == "torch.serialization" && name == "_get_layout")) {
    return PickleGlobalRisk::kSafe;
  }
  if (module == "torch" && (in(name, {"Size",
                                      "device",
                                      "float32",
                                      "float",
                                      "float16",
                                      "half",
                                      "bfloat16",
                                      "float64",
                                      "double",
                                      "int64",
                                      "long",
                                      "int32",
                                      "int",
                                      "int16",
                                      "short",
                                      "int8",
                                      "uint8",
                                      "bool",
                                      "uint16",
                                      "uint32",
                                      "uint64",
                                      "float8_e4m3fn",
                                      "float8_e5m2",
                                      "complex64",
                                      "complex128",
                                      "strided",
                                      "contiguous_format",
                                      "channels_last",
                                      "preserve_format",
                                      "float8_e4m3fnuz",
                                      "float8_e5m2fnuz",
                                      "float8_e8m0fnu",
                                      "float4_e2m1fn_x2",
                                      "complex32",
                                      "chalf",
                                      "cfloat",
                                      "cdouble"}) ||
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

namespace {

// torch.Tensor classes and legacy storage classes: torch.FloatTensor, torch.cuda.HalfStorage, ...
bool is_torch_type_class(const std::string& module, const std::string& name) {
  static const char* kElements[] = {"Float", "Double", "Half",   "BFloat16", "Byte",         "Char",
                                    "Short", "Int",    "Long",   "Bool",     "ComplexFloat", "ComplexDouble",
                                    "QInt8", "QUInt8", "QInt32", "QUInt4x2", "QUInt2x4"};
  const auto with_suffix = [&](const std::string& suffix) {
    if (!ends_with(name, suffix)) return false;
    const std::string element = name.substr(0, name.size() - suffix.size());
    for (const char* e : kElements) {
      if (element == e) return true;
    }
    return false;
  };
  const bool torch_module = module == "torch" || module == "torch.cuda";
  if (torch_module && (with_suffix("Storage") || with_suffix("Tensor"))) return true;
  if ((module == "torch.sparse" || module == "torch.cuda.sparse") && with_suffix("Tensor")) return true;
  return module == "torch.storage" && in(name, {"TypedStorage", "UntypedStorage"});
}

bool is_torch_dtype_or_qscheme(const std::string& name) {
  return in(name, {"float64",
                   "float32",
                   "float16",
                   "bfloat16",
                   "complex32",
                   "complex64",
                   "complex128",
                   "int64",
                   "int32",
                   "int16",
                   "int8",
                   "uint8",
                   "bool",
                   "qint8",
                   "quint8",
                   "qint32",
                   "quint4x2",
                   "quint2x4",
                   "uint16",
                   "uint32",
                   "uint64",
                   "float8_e5m2",
                   "float8_e4m3fn",
                   "float8_e5m2fnuz",
                   "float8_e4m3fnuz",
                   "float8_e8m0fnu",
                   "float4_e2m1fn_x2",
                   "uint1",
                   "uint2",
                   "uint3",
                   "uint4",
                   "uint5",
                   "uint6",
                   "uint7",
                   "int1",
                   "int2",
                   "int3",
                   "int4",
                   "int5",
                   "int6",
                   "int7",
                   "bits8",
                   "bits16",
                   "bits1x8",
                   "bits2x4",
                   "bits4x2",
                   "per_tensor_affine",
                   "per_tensor_symmetric",
                   "per_channel_affine",
                   "per_channel_symmetric",
                   "per_channel_affine_float_qparams"});
}

}  // namespace

bool torch_weights_only_allows(const std::string& raw_module, const std::string& name) {
  const std::string module = raw_module == "__builtin__" ? "builtins" : raw_module;
  if (module == "collections") return in(name, {"OrderedDict", "Counter"});
  if (module == "builtins") return in(name, {"set", "bytearray", "complex"});
  if (module == "_codecs") return name == "encode";
  if (module == "torch.nn.parameter") return name == "Parameter";
  if (module == "torch.serialization") return name == "_get_layout";
  if (module == "torch._tensor") return name == "_rebuild_from_type_v2";
  if (module == "torch._utils") {
    return in(name,
              {"_rebuild_parameter", "_rebuild_parameter_with_state", "_rebuild_qtensor", "_rebuild_tensor",
               "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_sparse_tensor",
               "_rebuild_sparse_csr_tensor", "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass",
               "_rebuild_device_tensor_from_numpy", "_rebuild_device_tensor_from_cpu_tensor"});
  }
  // torch >= 2.1 names UntypedStorage in the persistent id of the dtypes it saves untyped.
  if (module == "torch" &&
      (in(name, {"Size", "Tensor", "device", "UntypedStorage"}) || is_torch_dtype_or_qscheme(name)))
    return true;
  return is_torch_type_class(module, name);
}

std::string pickle_global_effect(const std::string& full_name, PickleGlobalRisk risk) {
  const size_t dot = full_name.rfind('.');
  const std::string module = dot == std::string::npos ? full_name : full_name.substr(0, dot);
  const std::string name = dot == std::string::npos ? "" : full_name.substr(dot + 1);
  std::string out = "import " + module + " and call " + name;
  switch (risk) {
    case PickleGlobalRisk::kDangerous: return out + ": runs commands, evaluates code or opens files";
    case PickleGlobalRisk::kExecutes: return out + ", running whatever that code does";
    case PickleGlobalRisk::kSafe: return out + " (data only as PyTorch or numpy ship it)";
  }
  return out;
}

uint32_t pickle_call_use(const std::vector<PickleArgShape>& args) {
  if (args.empty()) return kPickleUseOtherCall;
  bool strings = true;
  for (PickleArgShape a : args) strings = strings && a == PickleArgShape::kString;
  if (strings) return kPickleUseCalledWithStrings;
  if (args.size() == 1 && args[0] == PickleArgShape::kScalar) return kPickleUseCalledWithScalar;
  return kPickleUseOtherCall;
}

std::string pickle_uses_text(uint32_t uses) {
  static const std::pair<uint32_t, const char*> kWords[] = {
      {kPickleUseConstructed, "rebuilt from its fields"},
      {kPickleUseCalledWithScalar, "called with one scalar"},
      {kPickleUseCalledWithStrings, "called with strings"},
      {kPickleUseAttributeRead, "read by getattr"},
      {kPickleUseOtherCall, "called with other arguments"},
      {kPickleUseNumpyArray, "numpy's pickling of an array"}};
  std::string out;
  for (const auto& [bit, word] : kWords) {
    if (!(uses & bit)) continue;
    out += (out.empty() ? "" : ", ") + std::string(word);
  }
  return out.empty() ? "named only" : out;
}

}  // namespace ckpt

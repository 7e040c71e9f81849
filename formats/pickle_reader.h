// A restricted pickle reader for torch.save's data.pkl (and the legacy format's pickles). It is not
// an unpickler: it runs the stack machine over plain values (ints, floats, strings, tuples, lists,
// dicts) and never imports or calls anything. A global is a name, nothing more:
//  - the ones a tensor state dict needs are interpreted: collections.OrderedDict,
//    torch._utils._rebuild_tensor_v2 / _rebuild_parameter(_with_state),
//    torch._tensor._rebuild_from_type_v2, torch.<Type>Storage, torch.Size, collections.defaultdict,
//    builtins set/frozenset, _codecs.encode (how protocol 2 writes bytes), numpy's
//    _reconstruct + BUILD (an ndarray: becomes a tensor whose bytes live in the pickle), numpy.dtype,
//    numpy scalars, copyreg._reconstructor;
//  - every other global, dangerous or not, becomes an inert placeholder. REDUCE, NEWOBJ and BUILD on
//    a placeholder make an object value that records the name, the arguments and the state, so the
//    tensors and plain data around it are still read. Nothing a hostile file names is looked up.
// Every global named is listed with its risk (formats/pickle_globals.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/dtype.h"
#include "formats/pickle_globals.h"
#include "formats/py_value.h"

namespace ckpt {

constexpr size_t kPickleMaxStack = 100'000;
constexpr size_t kPickleMaxMemo = 1'000'000;
constexpr size_t kPickleMaxValues = 4'000'000;
constexpr size_t kPickleMaxNesting = 32;

// Flattening charges what it builds: each value, tensor or path visited costs 32 bytes (about
// what one nlohmann::json node and its slot cost in memory, measured) plus its strings (bytes
// count twice, as hex; names and dict keys count too). A pickle of n bytes may emit
// kPickleOutputBase + kPickleOutputPerByte * n, never more than kPickleMaxOutput; beyond that
// read_tensor_pickle fails with kCorruption naming the path. Every value a pickle describes takes
// at least one opcode byte, and a list of a million small ints (two bytes each) fits; the limit is
// for memo references that repeat a value at many paths, so that a hostile 1 MB pickle costs tens
// of MB and a second, not gigabytes (tests/data/pickle/memo-chain-fuzz.pkl).
constexpr size_t kPickleOutputBase = size_t{4} << 20;
constexpr size_t kPickleOutputPerByte = 16;
constexpr size_t kPickleMaxOutput = size_t{256} << 20;
size_t pickle_output_limit(size_t pickle_size);

// A tensor as _rebuild_tensor_v2 describes it: a view into a storage (a zip entry, or a legacy file's
// storage record). A numpy array has no storage: its bytes are `inline_bytes`, decoded from the pickle.
struct PickledTensor {
  std::string name;  // dotted path in the (nested) dict: "state.0.exp_avg"
  DType dtype = DType::kF32;
  std::string storage_key;      // persistent id key: the zip entry is <archive>/data/<key>
  std::string location;         // "cpu", "cuda:0"
  int64_t storage_numel = 0;    // in elements of `dtype`
  int64_t storage_nbytes = -1;  // an untyped storage's bytes (torch >= 2.1's _rebuild_tensor_v3); -1: typed
  int64_t storage_offset = 0;   // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements, as torch records it (any layout; never negative)
  bool inline_payload = false;  // a numpy array: storage_key is empty, the bytes are below
  std::string inline_bytes;     // row-major or as `stride` says, storage_numel elements
  // Non-empty when this name is a later path to a tensor object listed before under `alias_of`
  // (tied weights: lm_head.weight and embed.weight are one tensor; torch.load gives both names).
  std::string alias_of;
};

// A storage a persistent id names: ('storage', <Type>Storage, key, location, numel[, view]).
struct PickledStorage {
  std::string key;
  DType dtype = DType::kF32;
  int64_t numel = 0;
};

// The pickle's values form a graph: a memo GET refers to an earlier value again. Flattening
// follows the paths of that graph, with these rules for a value reached by more than one path:
//  - A tensor reached again is listed again under the later path, with `alias_of` naming its first
//    path (torch.load gives every name; readers hash the bytes once).
//  - A container that holds a tensor is expanded at every path (blocks sharing a submodule list all
//    their names, as torch.load gives them): its tensors are aliases at every later path.
//  - A value without tensors is written out in full at every path, as Python would see it
//    (optimizers share one betas tuple among param groups); the output limit above bounds it.
//  - A container that contains itself is an error: it nests deeper than kPickleMaxNesting.
//
// Objects (placeholders) flatten as JSON objects: {"__class__": "pkg.Cls"} for NEWOBJ and
// copyreg._reconstructor, {"__call__": "os.system"} for REDUCE, plus "__args__" (when not empty), the
// BUILD state's keys merged in when it is a dict with string keys (else "__state__"), and
// "__items__" / "__dict__" for what APPENDS / SETITEMS added. argparse.Namespace is its plain dict.
// Tensors inside objects are named by the same keys ("hparams.__args__.0"). A dict whose keys are
// not all strings or ints (a DCP .metadata's storage_data) becomes {"__pairs__": [[key, value], ...]}.
struct PickledStateDict {
  std::vector<PickledTensor> tensors;  // in pickle order
  // The whole value as Python would hold it (py_value.h), tensors as references to their names:
  // what comparisons of the state stand on. `metadata` is a JSON view of its non-tensor leaves by
  // dotted path, for checks that read fields by name; it loses tuple vs list, bytes vs text, and
  // invalid UTF-8 (U+FFFD), so nothing compares values on it.
  PyValuePtr value;
  nlohmann::json metadata = nlohmann::json::object();  // non-tensor leaves and aliases by dotted path
  std::vector<PickleGlobal> globals;                   // every global named, in order of first use
  std::vector<PickledStorage> storages;                // every storage key named, in order of first use
  size_t end_offset = 0;                               // just past the STOP opcode
};

// Whether the reader gives `module.name` a meaning of its own (a tensor rebuild, a storage type,
// torch.Size, OrderedDict, ...) rather than keeping it as an inert name.
bool pickle_global_is_interpreted(const std::string& module, const std::string& name);

// Runs the restricted VM over `data` (the bytes of data.pkl) up to its first STOP and flattens the
// result. `where` names the file in messages. Unsupported opcodes are kNotSupported; malformed
// pickles are kCorruption or kTruncated.
// A pickle that fails to read says in its message which globals it had named before the failure:
// a real unpickler imports (and may call) each of them before it reaches the same point.
Result<PickledStateDict> read_tensor_pickle(const uint8_t* data, size_t size, const std::string& where);

// The globals a pickle names up to its STOP or up to the first opcode that cannot be read, whichever
// comes first: what an unpickler would have imported before finishing or failing.
std::vector<PickleGlobal> pickle_globals_before_error(const uint8_t* data, size_t size);

// Whether a pickle's value is torch.save's legacy magic number (0x1950a86a20f9469cfc6c), in any
// protocol's spelling (LONG1, protocol 0's text LONG).
bool is_legacy_magic(const PickledStateDict& pickle);

}  // namespace ckpt

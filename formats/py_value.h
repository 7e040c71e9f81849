// A value as Python holds it after loading a pickle, built without running anything: the typed tree
// every comparison of non-tensor state stands on (`diff`, the drill's final state). JSON cannot keep
// what matters here: a tuple and a list with the same items, text and bytes, 3 and 3.0, a str whose
// bytes are not valid UTF-8, a set (whose order depends on the writer's hash seed) and a list. So the
// reader builds this tree, and JSON appears only at a report's edge (py_value_to_json) and in the
// pickle reader's flattened `metadata` view that checks read fields from by name.
//
// Values are immutable and shared: a memo GET in the pickle gives the same node at two paths, so the
// tree is a DAG whose size is the number of values the pickle built, never the number of its paths.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ckpt {

enum class PyType : uint8_t {
  kNone,
  kBool,
  kInt,     // fits int64
  kBigInt,  // wider: `s` is its magnitude in hex, "0x…" or "-0x…", no leading zero digits
  kFloat,
  kStr,    // `s` holds the bytes the file holds (UTF-8 unless the file lies): compared as bytes
  kBytes,  // bytes and bytearray
  kTuple,
  kList,
  kSet,
  kFrozenSet,
  kDict,
  kObject,  // what calling a global would have made (never made): `s` names the global
  kGlobal,  // a global named and not called
  kTensor,  // a tensor: `s` is its name in the file's tensor listing (tensors are compared as tensors)
  kStorage  // a storage a persistent id names: `s` is its key
};

struct PyValue;
using PyValuePtr = std::shared_ptr<const PyValue>;

struct PyValue {
  PyType type = PyType::kNone;
  int64_t i = 0;  // kBool, kInt; kObject: 1 when a call made it (REDUCE), 0 for NEWOBJ / copyreg
  double f = 0;   // kFloat
  std::string s;
  // kTuple, kList, kSet, kFrozenSet: the items in the file's order. kObject: {arguments, state,
  // items APPENDed, items SETITEMed}, each null when the pickle gave none.
  std::vector<PyValuePtr> items;
  std::vector<std::pair<PyValuePtr, PyValuePtr>> dict;  // kDict: in insertion order, keys of any type
};

constexpr size_t kPyObjectArgs = 0, kPyObjectState = 1, kPyObjectList = 2, kPyObjectDict = 3;

// Python's name for the type: "int", "tuple", "str", "bytes", an object's class, "global", "tensor".
std::string py_type_name(const PyValue& v);

// Python's repr, shortened to about `max_chars` with "…": (1, 2) and [1, 2], 'text' and b'bytes',
// 3 and 3.0, an object as Class(args) with its state. Invalid UTF-8 in a str shows as \x escapes.
std::string py_value_repr(const PyValue& v, size_t max_chars = 200);

// Equal as the state they describe: the same types all the way down, floats with the same bits (NaN
// equals a NaN of the same bits; 0.0 and -0.0 differ), sets and dicts regardless of order, lists and
// tuples in order, objects by class, arguments and state. Shared nodes compare once.
bool py_values_equal(const PyValue& a, const PyValue& b);

// The named parts a path walks into, as the pickle reader's metadata view names them: a dict's
// items by key (a str or int key as its text, any other key by its repr), a sequence's items by
// index, an object's "__args__", its state's keys (or "__state__"), "__items__" and "__dict__".
std::vector<std::pair<std::string, PyValuePtr>> py_value_parts(const PyValue& v);

// A text that names a value by type and content, equal for equal values (py_values_equal), sets and
// dicts in any order: a dict key's identity (1, '1' and True are three keys), a set item's.
std::string py_key_identity(const PyValue& v);

// JSON for a report: a tuple or set as an array, bytes as "bytes:<hex>", a big int as "int:0x…",
// an object as {"__class__"|"__call__": name, its parts}. Lossy by nature; use it for display only.
nlohmann::json py_value_to_json(const PyValue& v);

// A JSON document (a manifest, trainer_state.json) as the value json.load gives Python: objects are
// dicts with str keys, arrays lists, integers ints (or big ints), other numbers floats.
PyValuePtr py_value_from_json(const nlohmann::json& j);

}  // namespace ckpt

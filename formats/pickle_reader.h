// A restricted pickle reader for torch.save's data.pkl. It is not an unpickler: it runs the
// stack machine over plain values only (ints, floats, strings, tuples, lists, dicts) and knows
// exactly the globals a tensor state dict uses. Every other global is refused at the opcode that
// names it, so nothing a hostile file asks for is ever looked up, let alone called.
//
// Allowed globals: collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// torch._utils._rebuild_parameter, torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage.
// torch.storage._load_from_bytes is refused too: it unpickles a nested, unrestricted pickle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/dtype.h"

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

// A tensor as _rebuild_tensor_v2 describes it: a view into a storage (a zip entry).
struct PickledTensor {
  std::string name;  // dotted path in the (nested) dict: "state.0.exp_avg"
  DType dtype = DType::kF32;
  std::string storage_key;  // persistent id key: the zip entry is <archive>/data/<key>
  std::string location;     // "cpu", "cuda:0"
  int64_t storage_numel = 0;
  int64_t storage_offset = 0;  // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

// The pickle's values form a graph: a memo GET refers to an earlier value again. Flattening
// follows the paths of that graph, with these rules for a value reached by more than one path:
//  - A tensor, or a container that holds one, is expanded at its first path (in pickle order)
//    only. Each later path becomes a metadata entry "<path>": "ref:<first path>", so a tensor
//    shared by two keys is listed once and the second key is still visible.
//  - A value without tensors is written out in full at every path, as Python would see it
//    (optimizers share one betas tuple among param groups); the output limit above bounds it.
//  - A container that contains itself is an error: it nests deeper than kPickleMaxNesting.
struct PickledStateDict {
  std::vector<PickledTensor> tensors;                  // in pickle order
  nlohmann::json metadata = nlohmann::json::object();  // non-tensor leaves and aliases by dotted path
};

// Runs the restricted VM over `data` (the bytes of data.pkl) and flattens the result.
// `where` names the file in messages. Refused globals and opcodes are kNotSupported.
Result<PickledStateDict> read_tensor_pickle(const uint8_t* data, size_t size, const std::string& where);

}  // namespace ckpt

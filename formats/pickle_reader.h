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

struct PickledStateDict {
  std::vector<PickledTensor> tensors;                  // in pickle order
  nlohmann::json metadata = nlohmann::json::object();  // non-tensor leaves by dotted path
};

// Runs the restricted VM over `data` (the bytes of data.pkl) and flattens the result.
// `where` names the file in messages. Refused globals and opcodes are kNotSupported.
Result<PickledStateDict> read_tensor_pickle(const uint8_t* data, size_t size, const std::string& where);

}  // namespace ckpt

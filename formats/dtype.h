// Element types of tensors on disk. Names follow safetensors ("F32", "BF16", ...) because that is
// the one public vocabulary every format here can map onto losslessly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

// The safetensors dtypes. The order is part of no file format; new ones go at the end.
// F8_E4M3 is the "fn" variant (torch.float8_e4m3fn: no Inf, NaN is S.1111.111); F8_E5M2 is IEEE-like
// (the high byte of an F16).
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kU16,
  kU32,
  kU64,
  kF8E4M3,
  kF8E5M2
};

const char* dtype_name(DType dtype);                            // "F32"
std::optional<DType> dtype_from_name(const std::string& name);  // inverse of dtype_name
size_t dtype_size(DType dtype);                                 // bytes per element
bool dtype_is_floating(DType dtype);

// Product of the dims, or nullopt if a dim is negative or the product overflows int64.
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape);
// numel * element size, or nullopt on overflow or a bad shape.
std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& shape, DType dtype);

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[64, 128]"

// Widens one element at `p` to double (bf16/f16/f8 decoded exactly; int64/uint64 beyond 2^53
// rounded); used for stats and diffs.
double element_as_double(const uint8_t* p, DType dtype);

}  // namespace ckpt

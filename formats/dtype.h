// Element types of tensors on disk. Names follow safetensors ("F32", "BF16", ...) because that is
// the one public vocabulary every format here can map onto losslessly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dims.h"

namespace ckpt {

// The safetensors dtypes. The order is part of no file format; new ones go at the end.
// F8_E4M3 is the "fn" variant (torch.float8_e4m3fn: no Inf, NaN is S.1111.111); F8_E5M2 is IEEE-like
// (the high byte of an F16). The "fnuz" variants (AMD's; torch.float8_e4m3fnuz, float8_e5m2fnuz) have
// no Inf and no -0: their one NaN is 0x80, and their biases are 8 and 16. F8_E8M0 (torch.float8_e8m0fnu,
// the MX block scale) is a bare exponent, 2^(e-127), 0xff NaN. C32/C64/C128 are complex numbers of two
// F16/F32/F64 (real, then imaginary); they are compared bit for bit, not as floats.
// F4_E2M1FN_X2 is torch.float4_e2m1fn_x2: one byte holds two packed e2m1 values and the shape counts
// bytes (safetensors' "F4" counts nibbles: another layout); compared bit for bit, widened as the raw byte.
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
  kF8E5M2,
  kF8E4M3Fnuz,
  kF8E5M2Fnuz,
  kF8E8M0,
  kC32,
  kC64,
  kC128,
  kF4E2M1X2
};

const char* dtype_name(DType dtype);                            // "F32"
std::optional<DType> dtype_from_name(const std::string& name);  // inverse of dtype_name
// torch's dtype names, as a pickle names them after "torch." ("float32", "half", "float8_e4m3fn",
// "complex64"); nullopt for one with no DType here (the quantized types, float4_e2m1fn_x2, bits*).
std::optional<DType> dtype_from_torch_name(const std::string& name);
std::string torch_dtype_name(DType dtype);  // "torch.float32"
size_t dtype_size(DType dtype);             // bytes per element
bool dtype_is_floating(DType dtype);

// Product of the dims, or nullopt if a dim is negative or the product overflows int64.
std::optional<int64_t> checked_numel(DimsView shape);
// numel * element size, or nullopt on overflow or a bad shape.
std::optional<uint64_t> checked_nbytes(DimsView shape, DType dtype);

std::string shape_to_string(DimsView shape);  // "[64, 128]"

// Widens one element at `p` to double (bf16/f16/f8 decoded exactly; int64/uint64 beyond 2^53
// rounded; a complex number to its modulus |z|); used for stats and diffs.
double element_as_double(const uint8_t* p, DType dtype);

}  // namespace ckpt

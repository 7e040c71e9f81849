#include "formats/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace ckpt {

namespace {
struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
  bool floating;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4, true},
    {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},
    {DType::kF64, "F64", 8, true},
    {DType::kI64, "I64", 8, false},
    {DType::kI32, "I32", 4, false},
    {DType::kI16, "I16", 2, false},
    {DType::kI8, "I8", 1, false},
    {DType::kU8, "U8", 1, false},
    {DType::kBool, "BOOL", 1, false},
    {DType::kU16, "U16", 2, false},
    {DType::kU32, "U32", 4, false},
    {DType::kU64, "U64", 8, false},
    {DType::kF8E4M3, "F8_E4M3", 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, true},
    {DType::kF8E4M3Fnuz, "F8_E4M3FNUZ", 1, true},
    {DType::kF8E5M2Fnuz, "F8_E5M2FNUZ", 1, true},
    {DType::kF8E8M0, "F8_E8M0", 1, true},
    {DType::kC32, "C32", 4, false},
    {DType::kC64, "C64", 8, false},
    {DType::kC128, "C128", 16, false},
    {DType::kF4E2M1X2, "F4_E2M1FN_X2", 1, false},
};
static_assert(sizeof(kDTypes) / sizeof(kDTypes[0]) == static_cast<size_t>(DType::kF4E2M1X2) + 1,
              "one row per DType, in enum order");
const DTypeInfo& info(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

// torch's names for each dtype, the canonical one first (what torch_dtype_name gives).
struct TorchDTypeName {
  const char* name;
  DType dtype;
};
constexpr TorchDTypeName kTorchNames[] = {
    {"float32", DType::kF32},
    {"float", DType::kF32},
    {"float64", DType::kF64},
    {"double", DType::kF64},
    {"float16", DType::kF16},
    {"half", DType::kF16},
    {"bfloat16", DType::kBF16},
    {"int64", DType::kI64},
    {"long", DType::kI64},
    {"int32", DType::kI32},
    {"int", DType::kI32},
    {"int16", DType::kI16},
    {"short", DType::kI16},
    {"int8", DType::kI8},
    {"uint8", DType::kU8},
    {"bool", DType::kBool},
    {"uint16", DType::kU16},
    {"uint32", DType::kU32},
    {"uint64", DType::kU64},
    {"float8_e4m3fn", DType::kF8E4M3},
    {"float8_e5m2", DType::kF8E5M2},
    {"float8_e4m3fnuz", DType::kF8E4M3Fnuz},
    {"float8_e5m2fnuz", DType::kF8E5M2Fnuz},
    {"float8_e8m0fnu", DType::kF8E8M0},
    {"complex32", DType::kC32},
    {"chalf", DType::kC32},
    {"complex64", DType::kC64},
    {"cfloat", DType::kC64},
    {"complex128", DType::kC128},
    {"cdouble", DType::kC128},
    {"float4_e2m1fn_x2", DType::kF4E2M1X2},
};

double half_to_double(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// float8_e4m3fn: bias 7, no infinities, S.1111.111 is NaN, largest finite 448.
double e4m3_to_double(uint8_t b) {
  const int exponent = (b >> 3) & 0xf;
  const int mantissa = b & 0x7;
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(mantissa, -9);
  return sign * std::ldexp(mantissa + 8, exponent - 10);
}
// An 8-bit float with no Inf and no -0 ("fnuz"): 0x80 is the one NaN; `bias` 8 (e4m3) or 16 (e5m2).
double fnuz_to_double(uint8_t b, int mantissa_bits, int bias) {
  if (b == 0x80) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = (b & 0x7f) >> mantissa_bits;
  const int mantissa = b & ((1 << mantissa_bits) - 1);
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp(mantissa + (1 << mantissa_bits), exponent - bias - mantissa_bits);
}

template <typename Part>
double complex_modulus(const uint8_t* p, DType part) {
  return std::hypot(element_as_double(p, part), element_as_double(p + sizeof(Part), part));
}
}  // namespace

std::optional<DType> dtype_from_torch_name(const std::string& name) {
  for (const auto& t : kTorchNames) {
    if (name == t.name) return t.dtype;
  }
  return std::nullopt;
}

std::string torch_dtype_name(DType dtype) {
  for (const auto& t : kTorchNames) {
    if (t.dtype == dtype) return std::string("torch.") + t.name;
  }
  return dtype_name(dtype);
}

const char* dtype_name(DType dtype) {
  return info(dtype).name;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

size_t dtype_size(DType dtype) {
  return info(dtype).size;
}
bool dtype_is_floating(DType dtype) {
  return info(dtype).floating;
}

std::optional<int64_t> checked_numel(DimsView shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::optional<uint64_t> checked_nbytes(DimsView shape, DType dtype) {
  auto n = checked_numel(shape);
  if (!n) return std::nullopt;
  const uint64_t size = dtype_size(dtype);
  if (static_cast<uint64_t>(*n) > std::numeric_limits<uint64_t>::max() / size) return std::nullopt;
  return static_cast<uint64_t>(*n) * size;
}

std::string shape_to_string(DimsView shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

double element_as_double(const uint8_t* p, DType dtype) {
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return half_to_double(v);
    }
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      const uint32_t bits = static_cast<uint32_t>(v) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kI16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kI8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DType::kU8: return p[0];
    case DType::kBool: return p[0] ? 1.0 : 0.0;
    case DType::kU16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kU32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kU64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kF8E4M3: return e4m3_to_double(p[0]);
    case DType::kF8E5M2: return half_to_double(static_cast<uint16_t>(p[0] << 8));
    case DType::kF8E4M3Fnuz: return fnuz_to_double(p[0], 3, 8);
    case DType::kF8E5M2Fnuz: return fnuz_to_double(p[0], 2, 16);
    case DType::kF8E8M0:
      return p[0] == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, p[0] - 127);
    case DType::kC32: return complex_modulus<uint16_t>(p, DType::kF16);
    case DType::kC64: return complex_modulus<float>(p, DType::kF32);
    case DType::kC128: return complex_modulus<double>(p, DType::kF64);
    case DType::kF4E2M1X2: return p[0];
  }
  return 0.0;
}

}  // namespace ckpt

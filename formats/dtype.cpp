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
    {DType::kF32, "F32", 4, true},        {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},      {DType::kF64, "F64", 8, true},
    {DType::kI64, "I64", 8, false},       {DType::kI32, "I32", 4, false},
    {DType::kI16, "I16", 2, false},       {DType::kI8, "I8", 1, false},
    {DType::kU8, "U8", 1, false},         {DType::kBool, "BOOL", 1, false},
    {DType::kU16, "U16", 2, false},       {DType::kU32, "U32", 4, false},
    {DType::kU64, "U64", 8, false},       {DType::kF8E4M3, "F8_E4M3", 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, true},
};
static_assert(sizeof(kDTypes) / sizeof(kDTypes[0]) == static_cast<size_t>(DType::kF8E5M2) + 1,
              "one row per DType, in enum order");
const DTypeInfo& info(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

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
}  // namespace

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

std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& shape, DType dtype) {
  auto n = checked_numel(shape);
  if (!n) return std::nullopt;
  const uint64_t size = dtype_size(dtype);
  if (static_cast<uint64_t>(*n) > std::numeric_limits<uint64_t>::max() / size) return std::nullopt;
  return static_cast<uint64_t>(*n) * size;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
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
  }
  return 0.0;
}

}  // namespace ckpt

#include "base/status.h"

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "formats/dtype.h"

namespace ckpt {
namespace {

Result<int> half(int x) {
  if (x % 2) return Status::invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Status quarter(int x, int* out) {
  CKPT_ASSIGN_OR_RETURN(int h, half(x));
  CKPT_ASSIGN_OR_RETURN(*out, half(h));
  return Status::ok();
}

TEST(Status, PropagatesFirstError) {
  int out = 0;
  EXPECT_TRUE(quarter(8, &out).is_ok());
  EXPECT_EQ(out, 2);
  Status s = quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
  EXPECT_EQ(s.with_context("f.cks").to_string(), "invalid argument: f.cks: odd: 3");
}

TEST(DType, CheckedSizesRejectOverflowAndNegativeDims) {
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(*checked_nbytes(Shape{2, 3}, DType::kBF16), 12u);
  EXPECT_FALSE(checked_numel(Shape{-1, 4}).has_value());
  EXPECT_FALSE(checked_nbytes(Shape{INT64_MAX / 2, 3}, DType::kF32).has_value());
  EXPECT_EQ(*dtype_from_name("BOOL"), DType::kBool);
  EXPECT_FALSE(dtype_from_name("F8").has_value());
}

TEST(DType, DecodesHalfAndBFloat16Exactly) {
  const uint8_t one_half[2] = {0x00, 0x38};   // f16 0.5
  const uint8_t minus_two[2] = {0x00, 0xc0};  // bf16 -2.0
  EXPECT_EQ(element_as_double(one_half, DType::kF16), 0.5);
  EXPECT_EQ(element_as_double(minus_two, DType::kBF16), -2.0);
}

TEST(Sha256, MatchesKnownVector) {
  EXPECT_EQ(sha256_hex(std::string("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace ckpt

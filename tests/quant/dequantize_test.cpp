// Block layouts checked by construction (the bit-exact comparison with the gguf package's
// dequantization is test_dequant_oracle.py): each test builds a block whose values it knows.
#include "quant/dequantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/half.h"

namespace rlt::quant {
namespace {

void put_half(std::vector<uint8_t>& b, size_t at, float x) {
  const uint16_t h = f32_to_f16(x);
  std::memcpy(b.data() + at, &h, 2);
}

std::vector<float> run(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  Status st = dequantize_row(type, bytes.data(), n, out.data());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

TEST(Dequantize, Q8_0IsScaleTimesInt8) {
  std::vector<uint8_t> b(34);
  put_half(b, 0, 0.5f);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  const auto y = run(GgmlType::kQ8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 16)) << j;
}

TEST(Dequantize, Q4_0AndQ4_1PutLowNibblesFirst) {
  std::vector<uint8_t> b0(18), b1(20);
  put_half(b0, 0, 2.0f);
  put_half(b1, 0, 2.0f);
  put_half(b1, 2, -1.0f);
  for (int j = 0; j < 16; ++j) {
    b0[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    b1[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  const auto y0 = run(GgmlType::kQ4_0, b0, 32);
  const auto y1 = run(GgmlType::kQ4_1, b1, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y0[j], 2.0f * static_cast<float>(j - 8));
    EXPECT_EQ(y0[j + 16], 2.0f * static_cast<float>(15 - j - 8));
    EXPECT_EQ(y1[j], 2.0f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(y1[j + 16], 2.0f * static_cast<float>(15 - j) - 1.0f);
  }
}

TEST(Dequantize, Q5_0TakesTheFifthBitFromQh) {
  std::vector<uint8_t> b(22);
  put_half(b, 0, 1.0f);
  const uint32_t qh = 0x80000001u;  // values 0 and 31 get the fifth bit
  std::memcpy(b.data() + 2, &qh, 4);
  const auto y = run(GgmlType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 16.0f - 16.0f);
  EXPECT_EQ(y[1], -16.0f);
  EXPECT_EQ(y[31], 0.0f);
  EXPECT_EQ(y[30], -16.0f);
}

TEST(Dequantize, Q4_KAppliesEachSubBlockScaleAndMin) {
  std::vector<uint8_t> b(144, 0);
  put_half(b, 0, 1.0f);   // d
  put_half(b, 2, 0.25f);  // dmin
  // Sub-blocks 0..3: scale j + 1, min j (6 bits, low half of the 12 scale bytes).
  for (int j = 0; j < 4; ++j) {
    b[4 + j] = static_cast<uint8_t>(j + 1);
    b[8 + j] = static_cast<uint8_t>(j);
  }
  // Sub-blocks 4..7: scale 1, min 0 (low nibbles of bytes 8..11, no high bits).
  for (int j = 0; j < 4; ++j) b[12 + j] = 1;
  for (int l = 0; l < 128; ++l) b[16 + l] = static_cast<uint8_t>(3 | (5 << 4));
  const auto y = run(GgmlType::kQ4_K, b, 256);
  // Chunk c of 64 values: 32 low nibbles with sub-block 2c, 32 high nibbles with sub-block 2c + 1.
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32;
    const float q = (i % 64) < 32 ? 3.0f : 5.0f;
    const float scale = sub < 4 ? static_cast<float>(sub + 1) : 1.0f;
    const float min = sub < 4 ? 0.25f * static_cast<float>(sub) : 0.0f;
    EXPECT_EQ(y[i], scale * q - min) << i;
  }
}

TEST(Dequantize, FloatTypesWidenExactly) {
  std::vector<uint8_t> b(4);
  const uint16_t bf = f32_to_bf16(1.5f), h = f32_to_f16(-0.125f);
  std::memcpy(b.data(), &bf, 2);
  std::memcpy(b.data() + 2, &h, 2);
  EXPECT_EQ(run(GgmlType::kBF16, b, 1)[0], 1.5f);
  std::vector<uint8_t> hb(b.begin() + 2, b.end());
  EXPECT_EQ(run(GgmlType::kF16, hb, 1)[0], -0.125f);
}

TEST(Dequantize, RefusesPartialBlocksAndUnknownTypes) {
  std::vector<uint8_t> b(64, 0);
  std::vector<float> y(64);
  EXPECT_EQ(dequantize_row(GgmlType::kQ8_0, b.data(), 33, y.data()).code(),
            ErrorCode::kInvalidArgument);
  Status iq = dequantize_row(GgmlType::kIQ2_XXS, b.data(), 256, y.data());
  EXPECT_EQ(iq.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(iq.message().find("IQ2_XXS"), std::string::npos);
}

TEST(GgmlType, GeometryMatchesGgml) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_K, 512), 288);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ6_K, 256), 210);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ8_0, 576), 18 * 34);
  EXPECT_FALSE(ggml_row_bytes(GgmlType::kQ4_K, 576).has_value());  // 576 is not whole super-blocks
  EXPECT_FALSE(ggml_type_info(4).has_value());                     // retired Q4_2
  EXPECT_EQ(ggml_type_info(30)->name, "BF16");
}

}  // namespace
}  // namespace rlt::quant

#include "quant/random_blocks.h"

#include <cstring>
#include <random>

#include "common/half.h"

namespace rlt::quant {

std::vector<uint8_t> random_blocks(GgmlType type, int64_t blocks, uint32_t seed) {
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info || info->block_elems == 1) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * info->block_bytes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  auto put = [](uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* p = bytes.data() + b * info->block_bytes;
    const float d = scale(rng);
    switch (type) {
      case GgmlType::kQ6_K:
        put(p + 208, d);
        break;
      case GgmlType::kQ3_K:
        put(p + 108, d);
        break;
      case GgmlType::kQ2_K:
        put(p + 80, d / 16);
        put(p + 82, d / 16);
        break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        put(p, d);
        put(p + 2, -8.0f * d * scale(rng) / 2e-2f);
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        put(p, d / 16);
        put(p + 2, d / 16);
        break;
      default:  // Q4_0, Q5_0, Q8_0: d first
        put(p, d);
        break;
    }
  }
  return bytes;
}

}  // namespace rlt::quant

#include "model/initial_state.h"

#include <cmath>
#include <numbers>

#include "sampling/rng.h"

namespace rlt::model {

void draw_initial_state(uint64_t seed, int64_t position, double std, std::span<float> out) {
  constexpr uint64_t kPhi = 0x9E3779B97F4A7C15ull;
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  constexpr int kAttempts = 16;
  const uint64_t base = sampling::mix64(seed + kPhi * (static_cast<uint64_t>(position) + 1));
  for (size_t i = 0; i < out.size(); ++i) {
    double value = 0.0;
    for (int a = 0; a < kAttempts; ++a) {
      const uint64_t n = 16 * static_cast<uint64_t>(i) + static_cast<uint64_t>(a);
      const double u1 =
          static_cast<double>((sampling::mix64(base + kPhi * (2 * n + 1)) >> 11) + 1) * kUnit;
      const double u2 =
          static_cast<double>(sampling::mix64(base + kPhi * (2 * n + 2)) >> 11) * kUnit;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      if (std::abs(z) <= 3.0) {
        value = z;
        break;
      }
    }
    out[i] = static_cast<float>(value * std);
  }
}

}  // namespace rlt::model

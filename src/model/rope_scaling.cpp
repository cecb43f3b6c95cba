#include "model/rope_scaling.h"

#include <cmath>
#include <numbers>

#include "kernels/cpu/ops.h"

namespace rlt::model {

std::vector<float> rope_inv_freq(const io::ModelConfig& c) {
  std::vector<float> inv_freq = kernels::Rope::default_inv_freq(c.head_dim, c.rope_theta);
  const io::RopeScaling& s = c.rope_scaling;
  const auto factor = static_cast<float>(s.factor);
  switch (s.kind) {
    case io::RopeScaling::Kind::kNone:
      break;
    case io::RopeScaling::Kind::kLinear:
      for (float& f : inv_freq) f /= factor;
      break;
    case io::RopeScaling::Kind::kFrequencyFactors:
      for (size_t i = 0; i < inv_freq.size() && i < s.frequency_factors.size(); ++i) inv_freq[i] /= s.frequency_factors[i];
      break;
    case io::RopeScaling::Kind::kLlama3: {
      const auto old_context = static_cast<float>(s.original_max_position_embeddings);
      const auto low = static_cast<float>(s.low_freq_factor),
                 high = static_cast<float>(s.high_freq_factor);
      const float low_freq_wavelen = old_context / low;
      const float high_freq_wavelen = old_context / high;
      for (float& f : inv_freq) {
        const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
        if (wavelen > low_freq_wavelen) {
          f /= factor;  // long wavelengths: fully interpolated
        } else if (wavelen >= high_freq_wavelen) {
          const float smooth = (old_context / wavelen - low) / (high - low);
          f = (1.0f - smooth) * f / factor + smooth * f;
        }
      }
      break;
    }
  }
  return inv_freq;
}

}  // namespace rlt::model

// Helpers shared by the sampler tests: double-precision references and a probs shortcut.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/sampler.h"

namespace rlt::sampling::sampler_testing {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// softmax over `logits` in double; -inf entries get probability 0.
inline std::vector<double> softmax(const std::vector<double>& logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (double x : logits) max = std::max(max, x);
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - max);
  for (double& x : p) x /= sum;
  return p;
}

// The sampler's processed distribution for `logits`; fails the test on error.
inline std::vector<double> processed(const std::vector<float>& logits, const SamplingParams& params,
                                     const TokenHistory& history = {}) {
  Sampler sampler;
  std::vector<double> probs;
  const Status s = sampler.processed_probs(logits, params, history, probs);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return probs;
}

// Ids with non-zero probability.
inline std::vector<int32_t> support(const std::vector<double>& probs) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

inline void expect_probs_near(const std::vector<double>& actual,
                              const std::vector<double>& expected, double tolerance = 1e-6) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "token " << i;
  }
}

inline SamplingParams sampling(double temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

}  // namespace rlt::sampling::sampler_testing

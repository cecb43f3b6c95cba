#include "model/exit_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace rlt::model {
namespace {

ExitParams resolved(int64_t min_loops, int64_t max_loops, double threshold, int64_t total = 4) {
  auto r = resolve_exit_params({min_loops, max_loops, threshold}, total);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return *r;
}

// Worked vectors of the `ouro` rule (reference notes, looped-models §5.3).
TEST(OuroExitRule, WorkedVectors) {
  struct Case { std::vector<float> hazards; double threshold; int64_t min, max, expected; };
  const std::vector<float> h03(4, 0.3f), h05(4, 0.5f), h09(4, 0.9f);
  const Case cases[] = {
      {{0.3f, 0.3f, 0.3f, 0.3f}, 0.5, 2, 4, 2},   // row 1: CDF 0.3 -> 0.51
      {h03, 0.5, 1, 4, 2},                        // row 2
      {h03, 0.99, 1, 4, 4},                       // row 3
      {h03, 0.5, 3, 4, 3},                        // row 4: min_loops holds it to 3
      {h03, 1.0, 1, 4, 4},                        // row 5: threshold 1 disables exit
      {h03, 0.0, 2, 4, 2},                        // row 6: threshold 0 exits at min_loops
      {h05, 0.75, 2, 4, 2},                       // row 7: CDF exactly 0.75, `>=` exits
      {{0.1f, 0.9f, 0.9f, 0.9f}, 0.9, 2, 4, 2},   // row 8: 0.90999998 >= 0.9
      {h09, 0.5, 2, 3, 2},                        // row 9: min_loops blocks the exit at 1
      {h09, 0.1, 2, 2, 2},                        // row 10: max wins
      {{0.01f, 0.01f, 0.01f, 0.01f}, 0.5, 1, 3, 3},  // max_loops caps a token that never exits
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ouro_exit_depth(c.hazards.data(), 4, resolved(c.min, c.max, c.threshold)), c.expected)
        << "threshold " << c.threshold << " min " << c.min << " max " << c.max;
  }
}

TEST(OuroExitRule, AccumulatesInFloat64FromFloat32Hazards) {
  // sigmoid(g) = 0.3: after two loops 1 - 0.7^2 = 0.51 (0.5100000167 with f32 hazards).
  const float g = static_cast<float>(std::log(0.3 / 0.7));
  OuroExitAccumulator acc(resolved(2, 4, 0.5));
  EXPECT_FALSE(acc.update(1, g));
  EXPECT_NEAR(acc.exit_probability(), 0.3, 1e-7);
  EXPECT_TRUE(acc.update(2, g));
  EXPECT_NEAR(acc.exit_probability(), 0.51, 1e-7);
}

TEST(OuroExitRule, ResolvesDefaultsAndRejectsBadBounds) {
  auto d = resolve_exit_params({}, 4);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->min_loops, 2);
  EXPECT_EQ(d->max_loops, 4);
  auto shallow = resolve_exit_params({}, 1);  // default min_loops clamps to a one-loop model
  ASSERT_TRUE(shallow.ok());
  EXPECT_EQ(shallow->min_loops, 1);
  auto too_deep = resolve_exit_params({2, 5, 1.0}, 4);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("max_loops must be in [1, 4]"), std::string::npos);
  auto inverted = resolve_exit_params({3, 2, 1.0}, 4);
  ASSERT_FALSE(inverted.ok());
  EXPECT_NE(inverted.status().message().find("min_loops must be in [1, max_loops=2], got 3"), std::string::npos);
  EXPECT_FALSE(resolve_exit_params({1, 4, 1.5}, 4).ok());
  EXPECT_FALSE(resolve_exit_params({0, 4, 0.5}, 4).ok());
}

}  // namespace
}  // namespace rlt::model

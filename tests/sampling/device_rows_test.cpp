// The device sampler's inputs as the GPU runner derives them from requests (no device needed):
// the f32 values the host sampler computes, the penalties' id lists and their ranges, and the
// batch flags that size the device scratch.
#include "sampling/device_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/sampler.h"

namespace rlt::sampling {
namespace {

TEST(DeviceSampleRows, CarriesTheHostSamplersValues) {
  DeviceSampleRows rows;
  SamplingParams p;
  p.temperature = 0.7;
  p.top_k = 40;
  p.top_p = 0.9;
  p.min_p = 0.05;
  rows.add(p, nullptr, 0.25, 1000);
  p.top_k = 5000;  // past the vocabulary: off
  p.top_p = 1.0;
  p.min_p = 0.0;
  rows.add(p, nullptr, 0.5, 1000);
  SamplingParams greedy;
  greedy.temperature = 0.0;
  rows.add(greedy, nullptr, 0.75, 1000);
  ASSERT_EQ(rows.params.size(), 3u);
  const DeviceSampleParams& a = rows.params[0];
  EXPECT_EQ(a.temperature, temperature_f32(0.7));
  EXPECT_EQ(a.top_k, 40);
  EXPECT_EQ(a.top_p, 0.9);
  EXPECT_EQ(a.log_min_p, std::log(0.05));
  EXPECT_EQ(a.uniform, 0.25);
  EXPECT_EQ(a.logprobs, -1);
  EXPECT_EQ(rows.params[1].top_k, 0);
  EXPECT_EQ(rows.params[1].log_min_p, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(rows.params[2].temperature, 0.0f) << "greedy";
  EXPECT_TRUE(rows.any_top_p);
  EXPECT_FALSE(rows.any_penalties);
  EXPECT_FALSE(rows.any_logprobs);
  EXPECT_TRUE(rows.ids_in_vocab);
}

TEST(DeviceSampleRows, ListsEachRowsHistoryForItsPenalties) {
  TokenHistory first(std::vector<int32_t>{5, 6, 5});
  first.append(7);
  first.append(5);
  first.append(7);
  TokenHistory second(std::vector<int32_t>{9});
  second.append(3);
  DeviceSampleRows rows;
  SamplingParams both;
  both.repetition_penalty = 1.3;
  both.frequency_penalty = 0.5;
  both.presence_penalty = -0.25;
  both.logprobs = 4;
  rows.add(both, &first, 0.0, 100);
  SamplingParams frequency_only;
  frequency_only.frequency_penalty = 1.0;
  rows.add(frequency_only, &second, 0.0, 100);
  SamplingParams none;
  rows.add(none, &second, 0.0, 100);
  rows.add(both, nullptr, 0.0, 100);  // a request no longer live: nothing to penalize
  const DeviceSampleParams &a = rows.params[0], &b = rows.params[1], &c = rows.params[2],
                           &d = rows.params[3];
  EXPECT_EQ(a.repetition, repetition_penalty_f32(1.3));
  EXPECT_EQ(a.frequency, 0.5f);
  EXPECT_EQ(a.presence, -0.25f);
  EXPECT_EQ(a.logprobs, 4);
  // Row 0: distinct prompt + generated ids (first seen order), then the generated ids and counts.
  const std::vector<int32_t> ids(rows.history_ids.begin() + a.repeated_begin,
                                 rows.history_ids.begin() + a.repeated_end);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 6, 7}));
  const std::vector<int32_t> generated(rows.history_ids.begin() + a.generated_begin,
                                       rows.history_ids.begin() + a.generated_end);
  const std::vector<int32_t> counts(rows.history_counts.begin() + a.generated_begin,
                                    rows.history_counts.begin() + a.generated_end);
  EXPECT_EQ(generated, (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 1}));
  // Row 1: no repetition penalty, so no repetition list; its generated list follows row 0's.
  EXPECT_EQ(b.repeated_begin, b.repeated_end);
  EXPECT_EQ(b.generated_begin, a.generated_end);
  EXPECT_EQ(b.generated_end - b.generated_begin, 1);
  EXPECT_EQ(rows.history_ids[static_cast<size_t>(b.generated_begin)], 3);
  EXPECT_EQ(rows.history_counts[static_cast<size_t>(b.generated_begin)], 1);
  // Rows 2 and 3: nothing.
  for (const DeviceSampleParams* r : {&c, &d}) {
    EXPECT_EQ(r->repetition, 1.0f);
    EXPECT_EQ(r->frequency, 0.0f);
    EXPECT_EQ(r->repeated_begin, r->repeated_end);
    EXPECT_EQ(r->generated_begin, r->generated_end);
  }
  EXPECT_EQ(rows.history_ids.size(), rows.history_counts.size());
  EXPECT_TRUE(rows.any_penalties);
  EXPECT_TRUE(rows.any_logprobs);
  EXPECT_TRUE(rows.ids_in_vocab);
  rows.clear();
  EXPECT_TRUE(rows.params.empty());
  EXPECT_FALSE(rows.any_penalties || rows.any_logprobs || rows.any_top_p);
}

TEST(DeviceSampleRows, FlagsLogitBiasForTheHostSampler) {
  DeviceSampleRows rows;
  SamplingParams p;
  rows.add(p, nullptr, 0.5, 100);
  EXPECT_FALSE(rows.any_logit_bias);
  p.logit_bias = {{3, 5.0f}};
  rows.add(p, nullptr, 0.5, 100);
  EXPECT_TRUE(rows.any_logit_bias);  // the device sampler has no bias step
  rows.clear();
  EXPECT_FALSE(rows.any_logit_bias);
}

TEST(DeviceSampleRows, FlagsHistoryIdsOutsideTheVocabulary) {
  TokenHistory history(std::vector<int32_t>{1, 2, 150});
  DeviceSampleRows rows;
  SamplingParams p;
  p.repetition_penalty = 1.1;
  rows.add(p, &history, 0.0, 100);
  EXPECT_FALSE(rows.ids_in_vocab) << "the host sampler reports it";
}

TEST(DeviceSampleRows, SkipsARepetitionPenaltyThatIsOneInF32) {
  TokenHistory history(std::vector<int32_t>{1, 2});
  DeviceSampleRows rows;
  SamplingParams p;
  p.repetition_penalty = 1.0 + 1e-12;  // not 1 for the host, which then divides by 1.0f
  rows.add(p, &history, 0.0, 100);
  EXPECT_EQ(rows.params[0].repetition, 1.0f);
  EXPECT_EQ(rows.params[0].repeated_begin, rows.params[0].repeated_end);
}

}  // namespace
}  // namespace rlt::sampling

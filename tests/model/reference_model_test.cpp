#include "model/reference_model.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/ops.h"
#include "model_test_util.h"

namespace rlt::model {
namespace {

using testing::demo_model;

ExitParams full_depth() { return *resolve_exit_params({2, 0, 1.0}, 4); }

// Decoding token by token must give bit-identical logits to recomputing the whole sequence in
// one prefill: the kernels reduce every row in a fixed order, whatever the batch.
TEST(ReferenceModel, IncrementalDecodeEqualsFullRecomputeBitForBit) {
  ReferenceModel decoder(demo_model());
  std::vector<int32_t> seq = {5, 17, 42, 99, 3};
  auto step = decoder.prefill(seq);
  ASSERT_TRUE(step.ok());
  for (int i = 0; i < 6; ++i) {
    const auto next = static_cast<int32_t>(kernels::argmax(step->logits.data(), 259));
    seq.push_back(next);
    step = decoder.decode(next, full_depth());
    ASSERT_TRUE(step.ok());
    EXPECT_EQ(step->exit_depth, 4);
    ReferenceModel recompute(demo_model());
    auto whole = recompute.prefill(seq);
    ASSERT_TRUE(whole.ok());
    ASSERT_EQ(whole->logits, step->logits) << "step " << i;
  }
}

TEST(ReferenceModel, ChunkedPrefillEqualsWholePrefill) {
  const std::vector<int32_t> prompt = {1, 2, 3, 50, 60, 70, 80, 90, 100};
  ReferenceModel whole(demo_model());
  auto a = whole.prefill(prompt, /*trace=*/true);
  ASSERT_TRUE(a.ok());
  ReferenceModel chunked(demo_model());
  ASSERT_TRUE(chunked.prefill(std::span(prompt).first(2)).ok());
  ASSERT_TRUE(chunked.prefill(std::span(prompt).subspan(2, 4)).ok());
  auto b = chunked.prefill(std::span(prompt).subspan(6), /*trace=*/true);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->logits, b->logits);
  // The trace of the last chunk's last row equals the whole prefill's last row at every loop.
  const size_t hidden = 256;
  for (size_t loop = 0; loop < 4; ++loop) {
    std::vector<float> last_a(a->trace.hidden[loop].end() - hidden, a->trace.hidden[loop].end());
    std::vector<float> last_b(b->trace.hidden[loop].end() - hidden, b->trace.hidden[loop].end());
    EXPECT_EQ(last_a, last_b) << "loop " << loop;
  }
}

TEST(ReferenceModel, EarlyExitRespectsLoopBoundsAndSavesLoops) {
  ReferenceModel ref(demo_model());
  auto r = ref.generate(std::vector<int32_t>{10, 20, 30}, 24, {2, 3, 0.4}, /*ignore_eos=*/true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tokens.size(), 24u);
  EXPECT_EQ(r->exit_depths[0], 4) << "the first token comes from the full-depth prefill";
  int64_t total = 0;
  for (size_t i = 1; i < r->exit_depths.size(); ++i) {
    EXPECT_GE(r->exit_depths[i], 2);
    EXPECT_LE(r->exit_depths[i], 3);
    total += r->exit_depths[i];
  }
  EXPECT_LT(total, 3 * 23) << "threshold 0.4 should let some tokens exit at loop 2";
}

TEST(ReferenceModel, GenerationIsDeterministic) {
  ReferenceModel a(demo_model()), b(demo_model());
  auto ra = a.generate(std::vector<int32_t>{7, 8, 9}, 12, {2, 0, 0.5}, true);
  auto rb = b.generate(std::vector<int32_t>{7, 8, 9}, 12, {2, 0, 0.5}, true);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->tokens, rb->tokens);
  EXPECT_EQ(ra->exit_depths, rb->exit_depths);
}

TEST(ReferenceModel, StopsAtEosUnlessIgnored) {
  // Find the greedy continuation, then declare its third token the eos id via a model copy.
  ReferenceModel ref(demo_model());
  auto free_run = ref.generate(std::vector<int32_t>{11, 12}, 6, {}, true);
  ASSERT_TRUE(free_run.ok());
  auto model = std::make_shared<OuroModel>(*demo_model());
  model->generation.eos_token_ids = {free_run->tokens[2]};
  ReferenceModel stopping(model);
  auto stopped = stopping.generate(std::vector<int32_t>{11, 12}, 6, {}, false);
  ASSERT_TRUE(stopped.ok());
  // Stops at the first occurrence of that id, which is kept in the output.
  size_t first = 0;
  while (free_run->tokens[first] != free_run->tokens[2]) ++first;
  EXPECT_EQ(stopped->tokens.size(), first + 1);
  EXPECT_EQ(stopped->finish_reason, "stop");
  EXPECT_EQ(free_run->finish_reason, "length");
}

TEST(ReferenceModel, RejectsInvalidRequests) {
  ReferenceModel ref(demo_model());
  auto bad_token = ref.generate(std::vector<int32_t>{1, 259}, 2, {});
  ASSERT_FALSE(bad_token.ok());
  EXPECT_NE(bad_token.status().message().find("token id 259 is outside the vocabulary [0, 259)"), std::string::npos);
  auto zero = ref.generate(std::vector<int32_t>{1}, 0, {});
  EXPECT_NE(zero.status().message().find("max_tokens must be at least 1"), std::string::npos);
  std::vector<int32_t> long_prompt(4000, 5);
  auto too_long = ref.generate(long_prompt, 100, {});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("exceeds max_position_embeddings (4096)"), std::string::npos);
  auto loops = ref.generate(std::vector<int32_t>{1}, 2, {3, 2, 0.5});
  EXPECT_NE(loops.status().message().find("min_loops"), std::string::npos);
  EXPECT_FALSE(ref.prefill({}).ok());
}

}  // namespace
}  // namespace rlt::model

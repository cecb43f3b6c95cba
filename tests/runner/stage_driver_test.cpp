// The stage driver: which steps each stage runs, in which order, on any device's executor.
#include "runner/stage_driver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/model_runner.h"

namespace rlt::runner {
namespace {

class Recorder final : public StageExecutor {
 public:
  Status embed_pass(const PassInput& p) override {
    return add("embed " + std::to_string(p.num_rows()));
  }
  Status bind_pass(const PassInput& p) override {
    return add("bind " + std::to_string(p.num_loops()));
  }
  Status pass_loop(const PassInput&, size_t d) override { return add("loop " + std::to_string(d)); }
  Status pass_prelude(const PassInput&) override { return add("outer prelude"); }
  Status pass_readout(const PassInput&) override { return add("readout"); }
  Status prelude_pass(const PassInput& p) override { return add("prelude pass " + std::to_string(p.num_rows())); }
  Status keep_states(const PassInput& p) override {
    return add("keep " + std::to_string(p.keep_state.size()));
  }
  Status score_rows(const PassInput& p) override {
    return add("score " + std::to_string(p.scores.size()));
  }
  Status pass_logits(const PassInput& p) override { return add("logits " + std::to_string(p.num_rows())); }
  Status prelude(std::span<const kv::RequestId> r, std::span<const int32_t>) override {
    return add("prelude " + std::to_string(r.size()));
  }
  Status recurrent(const PassInput& p) override {
    return add("recurrent " + std::to_string(p.num_rows()));
  }
  Status coda(const ModelInput& in) override {
    return add("coda " + std::to_string(in.requests.size()));
  }

  std::vector<std::string> steps;
  size_t fail_at = 0;  // 1-based step that fails (0: none)

 private:
  Status add(std::string step) {
    steps.push_back(std::move(step));
    return steps.size() == fail_at ? internal_error("step failed") : Status();
  }
};

TEST(StageDriver, PrefillRunsEachPassLoopMajorThenKeepsItsPromptStatesAndScores) {
  ModelInput in;
  in.stage = Stage::kPrefill;
  for (int wave = 0; wave < 2; ++wave) {
    PassInput& p = in.add_pass();
    p.rows = {{1, 0, wave}, {2, 0, wave}};
    p.depths = {0, 1, 2};
    if (wave == 0) p.scores = {{1, 5, 0}};
    if (wave == 1) p.keep_state = {0};
  }
  Recorder r;
  ASSERT_TRUE(run_stages(in, r).ok());
  EXPECT_EQ(r.steps, (std::vector<std::string>{"embed 2", "bind 3", "outer prelude", "loop 0", "loop 1", "loop 2",
                                               "keep 0", "readout", "score 1", "embed 2", "bind 3", "outer prelude",
                                               "loop 0", "loop 1", "loop 2", "keep 1", "readout"}))
      << "the states kept after the last loop, scoring on the readout, only for passes with scored rows";
  Recorder failing;
  failing.fail_at = 4;
  EXPECT_FALSE(run_stages(in, failing).ok());
  EXPECT_EQ(failing.steps.size(), 4u) << "the first failing step ends the batch";
}

TEST(StageDriver, VerifyRunsOnePassThroughEveryLoopThenTheLogitsOfEveryRow) {
  ModelInput in;
  in.stage = Stage::kVerify;
  in.requests = {1, 2};
  PassInput& p = in.add_pass();
  p.rows = {{1, 0, 7}, {1, 0, 8}, {1, 0, 9}, {2, 0, 3}};
  p.tokens = {5, 6, 7, 8};
  p.depths = {0, 1};
  Recorder r;
  ASSERT_TRUE(run_stages(in, r).ok());
  EXPECT_EQ(r.steps,
            (std::vector<std::string>{"embed 4", "bind 2", "outer prelude", "loop 0", "loop 1", "readout", "logits 4"}));
  in.add_pass();
  EXPECT_NE(run_stages(in, r).message().find("a verify batch has 2 passes"), std::string::npos);
}

TEST(StageDriver, OtherStagesAreOneStepAndMalformedInputsAreRefused) {
  ModelInput in;
  in.requests = {4, 5, 6};
  in.stage = Stage::kPrelude;
  in.tokens = {7, 8, 9};
  Recorder r;
  ASSERT_TRUE(run_stages(in, r).ok());
  in.stage = Stage::kCoda;
  ASSERT_TRUE(run_stages(in, r).ok());
  in.stage = Stage::kRecurrent;
  in.add_pass().rows = {{4, 1, 3}, {5, 2, 3}, {6, 0, 3}};
  ASSERT_TRUE(run_stages(in, r).ok());
  EXPECT_EQ(r.steps, (std::vector<std::string>{"prelude 3", "coda 3", "recurrent 3"}));
  // A model whose prelude attends (Huginn) gets its PRELUDE rows as one pass.
  in.stage = Stage::kPrelude;
  ASSERT_TRUE(run_stages(in, r).ok());
  EXPECT_EQ(r.steps.back(), "prelude pass 3");
  in.tokens.pop_back();
  EXPECT_NE(run_stages(in, r).message().find("3 requests has 2 tokens"), std::string::npos);
  in.stage = Stage::kRecurrent;
  in.add_pass();
  EXPECT_NE(run_stages(in, r).message().find("2 passes"), std::string::npos);
}

TEST(StageDriver, InFlightRulesAreWordedOnce) {
  EXPECT_TRUE(check_can_submit(3, 1).ok());
  EXPECT_EQ(check_can_submit(3, 2).message(),
            "batch 3 submitted with 2 batches uncollected (at most 2)");
  EXPECT_TRUE(check_collect_order(3, 3).ok());
  EXPECT_EQ(check_collect_order(4, 3).message(),
            "collect of batch 4 but the oldest uncollected batch is 3");
  EXPECT_EQ(check_collect_order(4, std::nullopt).message(),
            "collect of batch 4 but the oldest uncollected batch is none");
}

}  // namespace
}  // namespace rlt::runner

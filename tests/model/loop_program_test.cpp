// The loop program: one loop of the core as data, and the device fusions rewriting it.
#include "model/loop_program.h"

#include <gtest/gtest.h>

namespace rlt::model {
namespace {

io::ModelConfig two_layers(io::Architecture arch) {
  io::ModelConfig c;
  c.architecture = arch;
  c.num_layers = 2;
  return c;
}

TEST(LoopProgram, OuroLayersAreSandwichedAndEndWithTheLoopNormAndGate) {
  EXPECT_EQ(
      describe(core_loop_program(two_layers(io::Architecture::kOuro))),
      "norm(input, 0); project(qkv, 0); attend(0); project(o_proj, 0); residual(attn_out, 0); "
      "norm(post_attn, 0); project(gate_up, 0); project(down, 0); residual(mlp_out, 0); "
      "norm(input, 1); project(qkv, 1); attend(1); project(o_proj, 1); residual(attn_out, 1); "
      "norm(post_attn, 1); project(gate_up, 1); project(down, 1); residual(mlp_out, 1); "
      "loop_norm; gate");
}

TEST(LoopProgram, LlamaLayersArePreNorm) {
  const std::string d = describe(core_loop_program(two_layers(io::Architecture::kLlama)));
  EXPECT_NE(d.find("residual(none, 0)"), std::string::npos) << d;
  EXPECT_EQ(d.find("attn_out"), std::string::npos) << d;
}

TEST(LoopProgram, ResidualsFuseWithTheNormAfterThem) {
  const LoopProgram fused =
      fuse_residual_norms(core_loop_program(two_layers(io::Architecture::kOuro)));
  EXPECT_EQ(
      describe(fused),
      "norm(input, 0); project(qkv, 0); attend(0); project(o_proj, 0); "
      "residual_norm(attn_out, 0 -> post_attn, 0); project(gate_up, 0); project(down, 0); "
      "residual_norm(mlp_out, 0 -> input, 1); project(qkv, 1); attend(1); project(o_proj, 1); "
      "residual_norm(attn_out, 1 -> post_attn, 1); project(gate_up, 1); project(down, 1); "
      "residual_norm(mlp_out, 1 -> final, 0); gate");
  // A single-row GEMV takes the residual-norm in: not the first norm, not the loop norm.
  EXPECT_EQ(
      describe(fuse_residual_norm_projections(fused)),
      "norm(input, 0); project(qkv, 0); attend(0); project(o_proj, 0); "
      "residual_norm_project(attn_out, 0 -> post_attn, 0 -> gate_up, 0); project(down, 0); "
      "residual_norm_project(mlp_out, 0 -> input, 1 -> qkv, 1); attend(1); project(o_proj, 1); "
      "residual_norm_project(attn_out, 1 -> post_attn, 1 -> gate_up, 1); project(down, 1); "
      "residual_norm(mlp_out, 1 -> final, 0); gate");
}

// Records the ops it is given.
class Recorder final : public LoopExecutor {
 public:
  Status execute(const LoopOp& op) override {
    ops.push_back(op);
    return ops.size() == fail_at ? internal_error("op failed") : Status();
  }
  LoopProgram ops;
  size_t fail_at = 0;
};

TEST(LoopProgram, RunSkipsTheGateWhenNotAskedAndStopsAtTheFirstError) {
  const LoopProgram p = core_loop_program(two_layers(io::Architecture::kOuro));
  Recorder all, no_gate, failing;
  ASSERT_TRUE(run_loop_program(p, all, /*gate=*/true).ok());
  EXPECT_EQ(all.ops.size(), p.size());
  ASSERT_TRUE(run_loop_program(p, no_gate, /*gate=*/false).ok());
  EXPECT_EQ(no_gate.ops.size(), p.size() - 1);
  EXPECT_EQ(no_gate.ops.back().kind, LoopOpKind::kLoopNorm);
  failing.fail_at = 3;
  EXPECT_FALSE(run_loop_program(p, failing, true).ok());
  EXPECT_EQ(failing.ops.size(), 3u);
}

}  // namespace
}  // namespace rlt::model

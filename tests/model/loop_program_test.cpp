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

TEST(LoopProgram, HuginnStepsStartWithTheAdapterAndNormTheResidualSums) {
  io::ModelConfig c = two_layers(io::Architecture::kHuginn);
  c.num_layers = 1;
  c.prelude_layers = 1;
  c.coda_layers = 2;
  const std::string block =
      "norm(input, 0); project(qkv, 0); attend(0); project(o_proj, 0); sum_norm(attn_out, 0); "
      "norm(post_attn, 0); project(gate_up, 0); project(down, 0); sum_norm(mlp_out, 0)";
  EXPECT_EQ(describe(core_loop_program(c)), "adapter; " + block);
  std::string prelude = block;
  for (size_t at = 0; (at = prelude.find("; ", at)) != std::string::npos; at += 2) prelude.insert(at + 2, "prelude.");
  EXPECT_EQ(describe(prelude_program(c)), "prelude." + prelude);
  const std::string readout = describe(readout_program(c));
  EXPECT_EQ(readout.rfind("loop_norm; coda.norm(input, 0)", 0), 0u) << readout;
  EXPECT_NE(readout.find("coda.sum_norm(mlp_out, 1); loop_norm"), std::string::npos) << readout;
  // Attention layers: the core's, then the prelude's, then the coda's; the outer blocks packed
  // one (num_layers) to a plane.
  EXPECT_EQ(attention_layer(c, LayerGroup::kCore, 0), 0);
  EXPECT_EQ(attention_layer(c, LayerGroup::kPrelude, 0), 1);
  EXPECT_EQ(attention_layer(c, LayerGroup::kCoda, 1), 3);
  EXPECT_EQ(outer_kv_planes(c), 3);
  EXPECT_EQ(outer_kv_slot(c.num_layers, 3).plane, 2);
  c.num_layers = 4;
  c.prelude_layers = c.coda_layers = 2;
  EXPECT_EQ(outer_kv_planes(c), 1);
  EXPECT_EQ(outer_kv_slot(4, 7).plane, 0);
  EXPECT_EQ(outer_kv_slot(4, 7).layer, 3);
  // Other models: no programs around the loop, and the fusions leave Huginn's ops alone.
  EXPECT_TRUE(prelude_program(two_layers(io::Architecture::kOuro)).empty());
  EXPECT_TRUE(readout_program(two_layers(io::Architecture::kOuro)).empty());
  EXPECT_EQ(describe(fuse_residual_norms(core_loop_program(c))), describe(core_loop_program(c)));
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

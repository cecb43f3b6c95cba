#include "model/loop_program.h"

#include <fmt/format.h>

namespace rlt::model {

namespace {

// How a block adds its two sublayers back: Ouro's sandwich (h += rms_norm(out)), Llama's plain sum
// (h += out), or Huginn's norm on the sum (h = rms_norm(h + out)).
enum class ResidualForm { kSandwich, kPlain, kSumNorm };

// `count` blocks of `group`: attention then MLP, each closed by its residual.
void add_blocks(LoopProgram& p, LayerGroup group, int64_t count, ResidualForm form) {
  const LoopOpKind residual = form == ResidualForm::kSumNorm ? LoopOpKind::kSumNorm : LoopOpKind::kResidual;
  const bool normed = form != ResidualForm::kPlain;
  for (int32_t l = 0; l < static_cast<int32_t>(count); ++l) {
    auto add = [&](LoopOpKind kind, NormWeight norm = NormWeight::kNone, Projection proj = Projection::kQkv) {
      LoopOp op;
      op.kind = kind;
      op.layer = l;
      op.norm = norm;
      op.proj = proj;
      op.group = group;
      p.push_back(op);
    };
    add(LoopOpKind::kNorm, NormWeight::kInput);
    add(LoopOpKind::kProject, NormWeight::kNone, Projection::kQkv);
    add(LoopOpKind::kAttend);
    add(LoopOpKind::kProject, NormWeight::kNone, Projection::kOProj);
    add(residual, normed ? NormWeight::kAttnOut : NormWeight::kNone);
    add(LoopOpKind::kNorm, NormWeight::kPostAttn);
    add(LoopOpKind::kProject, NormWeight::kNone, Projection::kGateUp);
    add(LoopOpKind::kProject, NormWeight::kNone, Projection::kDown);
    add(residual, normed ? NormWeight::kMlpOut : NormWeight::kNone);
  }
}

}  // namespace

LoopProgram prelude_program(const io::ModelConfig& c) {
  LoopProgram p;
  if (c.recurrent_injection()) add_blocks(p, LayerGroup::kPrelude, c.prelude_layers, ResidualForm::kSumNorm);
  return p;
}

LoopProgram readout_program(const io::ModelConfig& c) {
  LoopProgram p;
  if (!c.recurrent_injection()) return p;
  p.push_back({LoopOpKind::kLoopNorm, 0, NormWeight::kFinal});
  add_blocks(p, LayerGroup::kCoda, c.coda_layers, ResidualForm::kSumNorm);
  p.push_back({LoopOpKind::kLoopNorm, 0, NormWeight::kFinal});
  return p;
}

int64_t attention_layer(const io::ModelConfig& c, LayerGroup group, int32_t layer) {
  switch (group) {
    case LayerGroup::kCore:
      return layer;
    case LayerGroup::kPrelude:
      return c.num_layers + layer;
    case LayerGroup::kCoda:
      return c.num_layers + c.prelude_layers + layer;
  }
  return layer;
}

int32_t outer_kv_planes(const io::ModelConfig& c) {
  return static_cast<int32_t>((c.outer_layers() + c.num_layers - 1) / c.num_layers);
}

OuterKvSlot outer_kv_slot(int64_t core_layers, int64_t layer) {
  const int64_t k = layer - core_layers;
  return {static_cast<int32_t>(k / core_layers), static_cast<int32_t>(k % core_layers)};
}

LoopProgram core_loop_program(const io::ModelConfig& c) {
  LoopProgram p;
  if (c.recurrent_injection()) {
    p.push_back({LoopOpKind::kAdapter});
    add_blocks(p, LayerGroup::kCore, c.num_layers, ResidualForm::kSumNorm);
    return p;
  }
  add_blocks(p, LayerGroup::kCore, c.num_layers, c.sandwich_norms() ? ResidualForm::kSandwich : ResidualForm::kPlain);
  p.push_back({LoopOpKind::kLoopNorm, 0, NormWeight::kFinal});
  p.push_back({LoopOpKind::kGate});
  return p;
}

namespace {

// Replaces every pair (op, next) that `fuses` accepts by fuse(op, next).
template <typename Accept, typename Fuse>
LoopProgram fuse_pairs(const LoopProgram& program, Accept fuses, Fuse fuse) {
  LoopProgram out;
  for (size_t i = 0; i < program.size(); ++i) {
    if (i + 1 < program.size() && fuses(program[i], program[i + 1])) {
      out.push_back(fuse(program[i], program[i + 1]));
      ++i;
    } else {
      out.push_back(program[i]);
    }
  }
  return out;
}

}  // namespace

LoopProgram fuse_residual_norms(const LoopProgram& program) {
  return fuse_pairs(
      program,
      [](const LoopOp& op, const LoopOp& next) {
        return op.kind == LoopOpKind::kResidual &&
               (next.kind == LoopOpKind::kNorm || next.kind == LoopOpKind::kLoopNorm);
      },
      [](LoopOp op, const LoopOp& next) {
        op.kind = LoopOpKind::kResidualNorm;
        op.next_norm = next.norm;
        op.next_layer = next.layer;
        return op;
      });
}

LoopProgram fuse_residual_norm_projections(const LoopProgram& program) {
  return fuse_pairs(
      program,
      [](const LoopOp& op, const LoopOp& next) {
        return op.kind == LoopOpKind::kResidualNorm && op.next_norm != NormWeight::kFinal &&
               next.kind == LoopOpKind::kProject;
      },
      [](LoopOp op, const LoopOp& next) {
        op.kind = LoopOpKind::kResidualNormProject;
        op.proj = next.proj;
        return op;
      });
}

namespace {

const char* norm_name(NormWeight n) {
  switch (n) {
    case NormWeight::kNone:
      return "none";
    case NormWeight::kInput:
      return "input";
    case NormWeight::kAttnOut:
      return "attn_out";
    case NormWeight::kPostAttn:
      return "post_attn";
    case NormWeight::kMlpOut:
      return "mlp_out";
    case NormWeight::kFinal:
      return "final";
  }
  return "?";
}

const char* projection_name(Projection p) {
  switch (p) {
    case Projection::kQkv:
      return "qkv";
    case Projection::kOProj:
      return "o_proj";
    case Projection::kGateUp:
      return "gate_up";
    case Projection::kDown:
      return "down";
  }
  return "?";
}

}  // namespace

std::string describe(const LoopProgram& program) {
  std::string s;
  for (const LoopOp& op : program) {
    if (!s.empty()) s += "; ";
    if (op.group != LayerGroup::kCore) s += op.group == LayerGroup::kPrelude ? "prelude." : "coda.";
    switch (op.kind) {
      case LoopOpKind::kNorm:
        s += fmt::format("norm({}, {})", norm_name(op.norm), op.layer);
        break;
      case LoopOpKind::kProject:
        s += fmt::format("project({}, {})", projection_name(op.proj), op.layer);
        break;
      case LoopOpKind::kAttend:
        s += fmt::format("attend({})", op.layer);
        break;
      case LoopOpKind::kResidual:
        s += fmt::format("residual({}, {})", norm_name(op.norm), op.layer);
        break;
      case LoopOpKind::kLoopNorm:
        s += "loop_norm";
        break;
      case LoopOpKind::kGate:
        s += "gate";
        break;
      case LoopOpKind::kSumNorm:
        s += fmt::format("sum_norm({}, {})", norm_name(op.norm), op.layer);
        break;
      case LoopOpKind::kAdapter:
        s += "adapter";
        break;
      case LoopOpKind::kResidualNorm:
        s += fmt::format("residual_norm({}, {} -> {}, {})", norm_name(op.norm), op.layer,
                         norm_name(op.next_norm), op.next_layer);
        break;
      case LoopOpKind::kResidualNormProject:
        s += fmt::format("residual_norm_project({}, {} -> {}, {} -> {}, {})", norm_name(op.norm),
                         op.layer, norm_name(op.next_norm), op.next_layer, projection_name(op.proj),
                         op.next_layer);
        break;
    }
  }
  return s;
}

Status run_loop_program(std::span<const LoopOp> program, LoopExecutor& executor, bool gate) {
  for (const LoopOp& op : program) {
    if (op.kind == LoopOpKind::kGate && !gate) continue;
    RLT_RETURN_IF_ERROR(executor.execute(op));
  }
  return {};
}

}  // namespace rlt::model

#include "runner/paged_attention.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "common/half.h"
#include "kernels/cpu/parallel_rows.h"
#include "quant/quantize.h"

namespace rlt::runner {

PagedAttention::PagedAttention(kv::CpuKVStorage& storage,
                               std::unique_ptr<attention::AttentionBackend> backend,
                               int32_t num_q_heads, int32_t outer_planes)
    : storage_(storage), backend_(std::move(backend)), num_q_heads_(num_q_heads), outer_planes_(outer_planes) {}

Status PagedAttention::bind(const PassInput& pass) {
  status_ = {};
  depth_index_ = 0;
  pass_ = nullptr;
  const kv::KVGeometry& g = storage_.geometry();
  RLT_RETURN_IF_ERROR(check_pass_writes(pass, g.num_blocks, g.block_size, outer_planes_));
  // Every layer of every loop shares the pass's metadata: checked here once per planned depth
  // (and outer plane), so attend() runs each layer unchecked.
  for (size_t d = 0; d < pass.num_loops(); ++d) {
    attention::AttentionParams p = layer_params(0, pass.attention, d);
    RLT_RETURN_IF_ERROR(attention::check_attention_pass(*backend_, p));
  }
  for (int32_t o = 0; o < outer_planes_; ++o) {
    attention::AttentionParams p = layer_params(0, pass.outer_attention, static_cast<size_t>(o));
    RLT_RETURN_IF_ERROR(attention::check_attention_pass(*backend_, p));
  }
  pass_ = &pass;
  return {};
}

attention::AttentionParams PagedAttention::layer_params(int32_t layer, const attention::AttentionPlan& plan,
                                                        size_t table_set) const {
  attention::AttentionParams p;
  p.num_q_heads = num_q_heads_;
  p.k = storage_.layer_view(kv::KVPool::kKey, layer);
  p.v = storage_.layer_view(kv::KVPool::kValue, layer);
  plan.bind(p, table_set);
  return p;
}

namespace {
void store_row(const float* src, std::byte* dst, int64_t n, DType dtype) {
  if (dtype == DType::kQ8_0) {  // n is a multiple of 32 (KVGeometry::validate): every head whole
    const Status s =
        quant::quantize_row(quant::GgmlType::kQ8_0, src, n, reinterpret_cast<uint8_t*>(dst));
    (void)s;  // Q8_0 of whole blocks cannot fail
    return;
  }
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* out = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i)
    out[i] = dtype == DType::kBF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
}
}  // namespace

void PagedAttention::attend(int64_t layer, const float* q, const float* k, const float* v,
                            int64_t rows, float* out) {
  if (!status_.ok()) return;
  if (pass_ == nullptr) {
    status_ = internal_error("attention ran without a bound pass");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const kv::KVGeometry& g = storage_.geometry();
  const int64_t kv_dim = int64_t{g.num_kv_heads} * g.head_dim;
  // A core layer reads and writes the current depth's plane; an outer block (layer past the
  // core's) its outer plane: the blocks are packed num_layers to a plane (model::outer_kv_slot).
  const bool outer = layer >= g.num_layers;
  const model::OuterKvSlot slot = outer ? model::outer_kv_slot(g.num_layers, layer) : model::OuterKvSlot{};
  const auto l = static_cast<int32_t>(outer ? slot.layer : layer);
  const size_t table_set = outer ? static_cast<size_t>(slot.plane) : depth_index_;
  if (outer && table_set >= static_cast<size_t>(outer_planes_)) {
    status_ = internal_error(fmt::format("attention layer {} lies past the {} outer planes", layer, outer_planes_));
    return;
  }
  const PassWrites& writes = outer ? pass_->outer_writes : pass_->writes;
  // Every layer writes its rows' K/V before attending (the rows attend to themselves).
  kernels::parallel_rows(rows, 2 * kv_dim, [&](int64_t r) {
    const kv::BlockId block = writes.block[table_set * static_cast<size_t>(rows) + r];
    store_row(k + r * kv_dim, storage_.slot_data(kv::KVPool::kKey, block, l, writes.slot[r]), kv_dim, g.dtype);
    store_row(v + r * kv_dim, storage_.slot_data(kv::KVPool::kValue, block, l, writes.slot[r]), kv_dim, g.dtype);
  });
  attention::AttentionParams p = layer_params(l, outer ? pass_->outer_attention : pass_->attention, table_set);
  p.q = q;
  p.out = out;
  status_ = attention::run_checked_attention(*backend_, p);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace rlt::runner

#include "engine/paged_attention.h"

#include <cstring>

#include "common/half.h"

namespace rlt::engine {

PagedAttention::PagedAttention(kv::CpuKVStorage& storage,
                               std::unique_ptr<attention::AttentionBackend> backend,
                               const attention::BackendCapabilities& caps, int32_t num_q_heads)
    : storage_(storage), backend_(std::move(backend)), caps_(caps), num_q_heads_(num_q_heads) {}

Status PagedAttention::plan(std::span<const attention::PlannedRow> rows,
                            std::span<const int32_t> depths, const kv::KVCacheManager& kv,
                            bool packed) {
  status_ = {};
  depth_index_ = 0;
  return plan_model_pass(rows, depths, kv, packed && caps_.packed_prefill, staging_.next(),
                         writes_);
}

namespace {
void store_row(const float* src, std::byte* dst, int64_t n, DType dtype) {
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
  const kv::KVGeometry& g = storage_.geometry();
  const int64_t kv_dim = int64_t{g.num_kv_heads} * g.head_dim;
  const auto l = static_cast<int32_t>(layer);
  // Every layer writes its rows' K/V before attending (the rows attend to themselves).
  for (int64_t r = 0; r < rows; ++r) {
    const kv::BlockId block = writes_.block[depth_index_ * static_cast<size_t>(rows) + r];
    store_row(k + r * kv_dim, storage_.slot_data(kv::KVPool::kKey, block, l, writes_.slot[r]),
              kv_dim, g.dtype);
    store_row(v + r * kv_dim, storage_.slot_data(kv::KVPool::kValue, block, l, writes_.slot[r]),
              kv_dim, g.dtype);
  }
  attention::AttentionParams p;
  p.q = q;
  p.out = out;
  p.num_q_heads = num_q_heads_;
  p.k = storage_.layer_view(kv::KVPool::kKey, l);
  p.v = storage_.layer_view(kv::KVPool::kValue, l);
  staging_.current().bind(p, depth_index_);
  status_ = attention::run_attention(*backend_, p);
}

}  // namespace rlt::engine

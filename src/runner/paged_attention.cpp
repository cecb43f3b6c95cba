#include "runner/paged_attention.h"

#include <chrono>
#include <cstring>

#include "common/half.h"

namespace rlt::runner {

PagedAttention::PagedAttention(kv::CpuKVStorage& storage,
                               std::unique_ptr<attention::AttentionBackend> backend,
                               int32_t num_q_heads)
    : storage_(storage), backend_(std::move(backend)), num_q_heads_(num_q_heads) {}

Status PagedAttention::bind(const PassInput& pass) {
  status_ = {};
  depth_index_ = 0;
  pass_ = nullptr;
  const kv::KVGeometry& g = storage_.geometry();
  RLT_RETURN_IF_ERROR(check_pass_writes(pass, g.num_blocks, g.block_size));
  // Every layer of every loop shares the pass's metadata: checked here once per planned depth,
  // so attend() runs each layer unchecked.
  for (size_t d = 0; d < pass.num_loops(); ++d) {
    attention::AttentionParams p = layer_params(0, pass, d);
    RLT_RETURN_IF_ERROR(attention::check_attention_pass(*backend_, p));
  }
  pass_ = &pass;
  return {};
}

attention::AttentionParams PagedAttention::layer_params(int32_t layer, const PassInput& pass,
                                                        size_t depth_index) const {
  attention::AttentionParams p;
  p.num_q_heads = num_q_heads_;
  p.k = storage_.layer_view(kv::KVPool::kKey, layer);
  p.v = storage_.layer_view(kv::KVPool::kValue, layer);
  pass.attention.bind(p, depth_index);
  return p;
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
  if (pass_ == nullptr) {
    status_ = internal_error("attention ran without a bound pass");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const kv::KVGeometry& g = storage_.geometry();
  const int64_t kv_dim = int64_t{g.num_kv_heads} * g.head_dim;
  const auto l = static_cast<int32_t>(layer);
  // Every layer writes its rows' K/V before attending (the rows attend to themselves).
  for (int64_t r = 0; r < rows; ++r) {
    const kv::BlockId block = pass_->writes.block[depth_index_ * static_cast<size_t>(rows) + r];
    store_row(k + r * kv_dim, storage_.slot_data(kv::KVPool::kKey, block, l, pass_->writes.slot[r]),
              kv_dim, g.dtype);
    store_row(v + r * kv_dim,
              storage_.slot_data(kv::KVPool::kValue, block, l, pass_->writes.slot[r]), kv_dim,
              g.dtype);
  }
  attention::AttentionParams p = layer_params(l, *pass_, depth_index_);
  p.q = q;
  p.out = out;
  status_ = attention::run_checked_attention(*backend_, p);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace rlt::runner

#include "engine/paged_attention.h"

#include <fmt/format.h>

#include <cstring>

#include "common/half.h"

namespace rlt::engine {

PagedAttention::PagedAttention(kv::CpuKVStorage& storage, std::unique_ptr<attention::AttentionBackend> backend,
                               const attention::BackendCapabilities& caps, int32_t num_q_heads)
    : storage_(storage), backend_(std::move(backend)), caps_(caps), num_q_heads_(num_q_heads) {}

Status PagedAttention::plan(std::span<const attention::PlannedRow> rows, std::span<const int32_t> depths,
                            const kv::KVCacheManager& kv, bool packed) {
  status_ = {};
  depth_index_ = 0;
  Status lookup_error;
  const attention::TableSource tables = [&](uint64_t request, int32_t depth) -> std::span<const int32_t> {
    auto t = kv.block_table(request, depth);
    if (!t.ok()) {
      if (lookup_error.ok()) lookup_error = t.status();
      return {};
    }
    return *t;
  };
  attention::AttentionPlan& plan = staging_.next();
  const attention::PlannerOptions options{kv.block_size(), packed && caps_.packed_prefill, -1};
  Status s = depths.empty() ? attention::plan_attention(rows, tables, options, plan)
                            : attention::plan_attention_depths(rows, depths, tables, options, plan);
  if (!lookup_error.ok()) return lookup_error;
  RLT_RETURN_IF_ERROR(s);
  // Where each row's K/V goes: the plane of the depth it runs at, at its position.
  const int32_t bs = kv.block_size();
  const size_t passes = depths.empty() ? 1 : depths.size();
  write_block_.resize(passes);
  write_slot_.resize(rows.size());
  for (size_t d = 0; d < passes; ++d) {
    write_block_[d].resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const int32_t depth = depths.empty() ? rows[i].depth : depths[d];
      RLT_ASSIGN_OR_RETURN(auto table, kv.block_table(rows[i].request, depth));
      const int32_t page = rows[i].position / bs;
      if (page >= static_cast<int32_t>(table.size())) {
        return failed_precondition(fmt::format("request {} has no page for position {} at depth {}", rows[i].request,
                                               rows[i].position, depth));
      }
      write_block_[d][i] = table[page];
      write_slot_[i] = rows[i].position % bs;
    }
  }
  return {};
}

namespace {
void store_row(const float* src, std::byte* dst, int64_t n, DType dtype) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* out = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = dtype == DType::kBF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
}
}  // namespace

void PagedAttention::attend(int64_t layer, const float* q, const float* k, const float* v, int64_t rows, float* out) {
  if (!status_.ok()) return;
  const kv::KVGeometry& g = storage_.geometry();
  const int64_t kv_dim = int64_t{g.num_kv_heads} * g.head_dim;
  const auto l = static_cast<int32_t>(layer);
  // Every layer writes its rows' K/V before attending (the rows attend to themselves).
  for (int64_t r = 0; r < rows; ++r) {
    const kv::BlockId block = write_block_[depth_index_][r];
    store_row(k + r * kv_dim, storage_.slot_data(kv::KVPool::kKey, block, l, write_slot_[r]), kv_dim, g.dtype);
    store_row(v + r * kv_dim, storage_.slot_data(kv::KVPool::kValue, block, l, write_slot_[r]), kv_dim, g.dtype);
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

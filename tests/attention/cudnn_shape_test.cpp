// The cudnn backend's bucketing (attention/cudnn_shape.h), on the CPU: which calls share a cuDNN
// plan, what staging a plan holds, and which calls are refused with what fix.
#include "attention/cudnn_shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace rlt::attention {
namespace {

// A decode-style call: `seqs` single-query rows over bf16 pools in the NHD layout.
AttentionParams call(int64_t seqs, int32_t table_width, DType dtype = DType::kBF16,
                     int32_t head_dim = 128) {
  AttentionParams p;
  p.rows = p.num_seqs = seqs;
  p.num_q_heads = 16;
  p.table_width = table_width;
  for (auto* v : {&p.k, &p.v}) {
    v->num_blocks = 1000;
    v->block_size = 16;
    v->num_kv_heads = 16;
    v->head_dim = head_dim;
    v->dtype = dtype;
    v->head_stride = head_dim;
    v->token_stride = int64_t{16} * head_dim;
    v->block_stride = int64_t{24} * 2 * 16 * 16 * head_dim;  // every layer's K and V of a block
  }
  return p;
}

TEST(CudnnShape, CallsInOneBucketShareAPlan) {
  const auto a = cudnn_shape_of(call(5, 9));
  const auto b = cudnn_shape_of(call(8, 16));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->batch, 8);
  EXPECT_EQ(a->table_width, 16);
  EXPECT_EQ(a->max_q, 1);
  EXPECT_FALSE(a->causal());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(CudnnShapeHash{}(*a), CudnnShapeHash{}(*b));
  const auto c = cudnn_shape_of(call(9, 9));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->batch, 16);
  EXPECT_FALSE(*a == *c);
}

TEST(CudnnShape, PackedCallsPadEverySequenceToTheLongestQueryRun) {
  AttentionParams p = call(3, 70);
  const int32_t cu[] = {0, 1, 101, 104};
  p.rows = 104;
  p.cu_seqlens_q = cu;
  p.max_seqlen_q = 100;
  const auto s = cudnn_shape_of(p);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->batch, 4);
  EXPECT_EQ(s->max_q, 128);
  EXPECT_TRUE(s->causal());
  EXPECT_EQ(s->padded_rows(), 512);
  EXPECT_EQ(s->max_kv(), 128 * 16);
  // Q and O (2 bytes each), the two length vectors, the page table.
  EXPECT_EQ(s->staging_bytes(), 2 * 512 * 16 * 128 * 2 + 2 * 4 * 4 + 4 * 128 * 4);
}

TEST(CudnnShape, RefusesWhatCudnnCannotRunAndSaysWhatToDo) {
  const auto f32 = cudnn_shape_of(call(4, 4, DType::kF32));
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.status().message().find("--kv-dtype bf16"), std::string::npos)
      << f32.status().to_string();

  const auto wide = cudnn_shape_of(call(4, 4, DType::kBF16, 256));
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("head_dim 256"), std::string::npos)
      << wide.status().to_string();

  for (int32_t block_size : {0, 3, 24, 512}) {
    AttentionParams pages = call(4, 4);
    pages.k.block_size = pages.v.block_size = block_size;
    const auto page = cudnn_shape_of(pages);
    ASSERT_FALSE(page.ok()) << block_size;
    EXPECT_NE(page.status().message().find("--block-size 16"), std::string::npos)
        << page.status().to_string();
  }
  for (int32_t block_size : {1, 2, 256}) {
    AttentionParams pages = call(4, 4);
    pages.k.block_size = pages.v.block_size = block_size;
    EXPECT_TRUE(cudnn_shape_of(pages).ok()) << block_size;
  }

  AttentionParams odd = call(4, 4);
  odd.k.token_stride = 2052;
  const auto strides = cudnn_shape_of(odd);
  ASSERT_FALSE(strides.ok());
  EXPECT_NE(strides.status().message().find("multiples of 8"), std::string::npos)
      << strides.status().to_string();
}

// 300 packed sequences: 299 single rows then one 2,000-row chunk. As one call every sequence
// would be padded to 2,048 rows (8 GiB of staging); as sequence ranges each fits.
std::vector<int32_t> mixed_cu() {
  std::vector<int32_t> cu(301);
  for (int i = 0; i <= 300; ++i) cu[static_cast<size_t>(i)] = i == 300 ? 299 + 2000 : i;
  return cu;
}

TEST(CudnnShape, RefusesPaddingBeyondItsStagingLimitAsOneCall) {
  AttentionParams p = call(300, 200);
  const std::vector<int32_t> cu = mixed_cu();
  p.cu_seqlens_q = p.host_cu_seqlens_q = cu.data();
  p.rows = cu.back();
  p.max_seqlen_q = 2000;
  const auto s = cudnn_shape_of(p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kResourceExhausted);
}

TEST(CudnnShape, SplitsACallIntoSequenceRangesThatFit) {
  AttentionParams p = call(300, 200);
  const std::vector<int32_t> cu = mixed_cu();
  std::vector<int32_t> lengths(300, 2500), tables(300 * 200, 7);
  std::vector<float> rows_q(8), rows_out(8);  // stand-ins: only the pointers matter here
  p.q = rows_q.data();
  p.out = rows_out.data();
  p.cu_seqlens_q = p.host_cu_seqlens_q = cu.data();
  p.context_lengths = p.host_context_lengths = lengths.data();
  p.block_tables = p.host_block_tables = tables.data();
  p.rows = cu.back();
  p.max_seqlen_q = 2000;
  const auto ranges = cudnn_sequence_ranges(p, cu.data());
  ASSERT_TRUE(ranges.ok()) << ranges.status().to_string();
  ASSERT_GE(ranges->size(), 2u);
  int64_t next = 0;
  for (const SequenceRange& r : *ranges) {
    EXPECT_EQ(r.begin, next);
    EXPECT_LT(r.begin, r.end);
    next = r.end;
    const AttentionParams sub = sequence_range_params(p, r);
    EXPECT_EQ(sub.num_seqs, r.end - r.begin);
    EXPECT_EQ(sub.host_cu_seqlens_q, cu.data() + r.begin);  // absolute row offsets, q unmoved
    EXPECT_EQ(sub.q, p.q);
    EXPECT_EQ(sub.host_block_tables, tables.data() + r.begin * 200);
    EXPECT_EQ(sub.host_context_lengths, lengths.data() + r.begin);
    // The device pointers the staging kernels read move the same way; out stays whole.
    EXPECT_EQ(sub.cu_seqlens_q, cu.data() + r.begin);
    EXPECT_EQ(sub.block_tables, tables.data() + r.begin * 200);
    EXPECT_EQ(sub.context_lengths, lengths.data() + r.begin);
    EXPECT_EQ(sub.out, p.out);
    int32_t longest = 1;
    for (int64_t s = r.begin; s < r.end; ++s) longest = std::max(longest, cu[s + 1] - cu[s]);
    EXPECT_EQ(r.max_q, longest);
    EXPECT_EQ(sub.max_seqlen_q, longest);
    const auto shape = cudnn_shape_of(sub);
    EXPECT_TRUE(shape.ok()) << shape.status().to_string();
  }
  EXPECT_EQ(next, 300);
  // The long chunk does not drag the single rows before it: they share ranges of one-row padding.
  EXPECT_EQ(ranges->front().max_q, 1);

  // A call that fits stays whole; single-query rows are one range.
  const std::vector<int32_t> small = {0, 1, 5, 9};
  AttentionParams q = call(3, 8);
  q.cu_seqlens_q = q.host_cu_seqlens_q = small.data();
  q.max_seqlen_q = 40;  // a bound, not the longest run: the range carries the real one
  const auto whole = cudnn_sequence_ranges(q, small.data());
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ(whole->front().end, 3);
  EXPECT_EQ(whole->front().max_q, 4);
  EXPECT_EQ(sequence_range_params(q, whole->front()).max_seqlen_q, 4);
  // Without the host copy of cu_seqlens_q the call stays whole at its stated bound.
  const auto unknown = cudnn_sequence_ranges(q, nullptr);
  ASSERT_TRUE(unknown.ok());
  ASSERT_EQ(unknown->size(), 1u);
  EXPECT_EQ(unknown->front().max_q, 40);
  const auto decode = cudnn_sequence_ranges(call(7, 8), nullptr);
  ASSERT_TRUE(decode.ok());
  ASSERT_EQ(decode->size(), 1u);
  EXPECT_EQ(decode->front().end, 7);
}

TEST(CudnnShape, RefusesASequenceThatAloneExceedsTheLimit) {
  // One 70,000-row sequence: [1, 131072, 16, 128] in 16 bits is 512 MiB each for Q and O.
  AttentionParams p = call(1, 8);
  const std::vector<int32_t> cu = {0, 70000};
  p.cu_seqlens_q = p.host_cu_seqlens_q = cu.data();
  p.rows = 70000;
  p.max_seqlen_q = 70000;
  const auto ranges = cudnn_sequence_ranges(p, cu.data());
  ASSERT_FALSE(ranges.ok());
  EXPECT_EQ(ranges.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(ranges.status().message().find("--prefill-chunk-size"), std::string::npos)
      << ranges.status().to_string();
  EXPECT_NE(ranges.status().message().find("cuda_paged"), std::string::npos)
      << ranges.status().to_string();
}

}  // namespace
}  // namespace rlt::attention

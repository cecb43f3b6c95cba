// The backend equivalence checks, shared by the CPU attention tests and the GPU tests: each
// runs a backend against cpu_reference (or against itself) on randomized paged batches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "attention/capabilities.h"
#include "paged_test_data.h"

namespace rlt::attention::testing {


struct Case {
  int32_t head_dim, gqa, kv_heads, block_size, max_context, seqs;
  DType dtype;
  bool packed;
  int32_t pad;  // -1, 0, or -2 for stale-but-valid ids
  int32_t max_q_rows = 9;  // packed: query rows per sequence drawn from 1 .. this
};

// Tolerance: both backends read identical K/V values (bf16/f16 widen exactly) and compute in f32;
// they differ only in summation order (tiles, online rescaling, split-K merge). With N(0,1) data
// and softmax-weighted averages of magnitude <= ~4, that is a few f32 ulps: 1e-5 absolute holds
// for every dtype; any indexing, masking or merge bug gives errors near 1.
constexpr float kTolerance = 1e-5f;

// Packed prefill a backend runs on tensor cores rounds Q and the probabilities to the 16-bit K/V
// type (as FlashAttention does): those cases — packed, 16-bit K/V, one of `head_dims` — are held
// to `tolerance` instead (the backend's test states where it comes from).
struct LowPrecisionPrefill {
  std::vector<int32_t> head_dims;  // empty: every case is held to kTolerance
  float tolerance = kTolerance;

  bool applies(const Case& c) const {
    return c.packed && c.dtype != DType::kF32 &&
           std::find(head_dims.begin(), head_dims.end(), c.head_dim) != head_dims.end();
  }
  float for_case(const Case& c) const { return applies(c) ? tolerance : kTolerance; }
};

inline float run_case(const Case& c, uint32_t seed, AttentionBackend& backend) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> len_dist(1, c.max_context);
  std::vector<int32_t> lengths(static_cast<size_t>(c.seqs)), q_rows(lengths.size());
  int64_t rows = 0, max_q = 1;
  for (size_t s = 0; s < lengths.size(); ++s) {
    lengths[s] = len_dist(rng);
    q_rows[s] = c.packed ? std::uniform_int_distribution<int32_t>(1, std::min(lengths[s], c.max_q_rows))(rng) : 1;
    rows += q_rows[s];
    max_q = std::max<int64_t>(max_q, q_rows[s]);
  }
  int32_t width = 0;
  for (int32_t l : lengths) width = std::max(width, (l + c.block_size - 1) / c.block_size);
  width += 1;  // extra padding column
  const int32_t blocks = std::max(width + 8, 16);
  PagedPools pools(c.dtype, blocks, c.block_size, c.kv_heads, c.head_dim, rng);
  // Rows at mixed depths read different planes: each sequence gets its own random table.
  const std::vector<int32_t> tables = random_tables(lengths, c.block_size, blocks, width, c.pad, rng);
  std::vector<int32_t> cu(1, 0);
  for (int32_t n : q_rows) cu.push_back(cu.back() + n);
  const int32_t q_heads = c.kv_heads * c.gqa;
  std::vector<float> q(static_cast<size_t>(rows * q_heads * c.head_dim));
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);
  std::vector<float> expected(q.size(), NAN), actual(q.size(), NAN);
  AttentionParams p;
  p.q = q.data();
  p.rows = rows;
  p.num_q_heads = q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = tables.data();
  p.table_width = width;
  p.context_lengths = lengths.data();
  p.num_seqs = c.seqs;
  p.cu_seqlens_q = c.packed ? cu.data() : nullptr;
  p.max_seqlen_q = static_cast<int32_t>(max_q);
  auto reference = make_cpu_reference_backend();
  p.out = expected.data();
  EXPECT_TRUE(run_attention(*reference, p).ok());
  p.out = actual.data();
  Status s = run_attention(backend, p);
  EXPECT_TRUE(s.ok()) << s.to_string();
  float worst = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const float e = std::fabs(expected[i] - actual[i]);
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;  // a NaN (an unwritten output) fails
  }
  return worst;
}

// Randomized paged batches (head_dim, GQA, page size, dtype, packing, padding, long contexts):
// every case the backend declares it supports must match cpu_reference within kTolerance.
inline void check_random_batches(const BackendCapabilities& caps, AttentionBackend& backend,
                                 const LowPrecisionPrefill& low = {}) {
  const int32_t head_dims[] = {64, 80, 128, 256};
  const int32_t ratios[] = {1, 2, 4, 8};
  const int32_t pages[] = {1, 3, 16, 64, 256};
  const int32_t pads[] = {-1, 0, -2};
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  int cases = 0;
  for (int i = 0; i < 36; ++i) {
    Case c;
    c.head_dim = head_dims[i % 4];
    c.gqa = ratios[(i / 4) % 4];
    c.kv_heads = c.gqa >= 4 ? 1 : 2;
    c.block_size = pages[i % 5];
    c.dtype = dtypes[(i / 6) % 3];  // independent of the context length below
    c.packed = (i % 2) == 1;
    c.pad = pads[i % 3];
    // Mostly short contexts, some long enough for split-K (> 1024) and up to 8192.
    c.max_context = (i % 6 == 0) ? 8192 : (i % 6 == 3 ? 2500 : 300);
    c.seqs = c.max_context > 1000 ? 2 : 5;
    const bool supported = caps.head_dim.accepts(c.head_dim) && caps.page_size.accepts(c.block_size) &&
                           caps.gqa_ratio.accepts(c.gqa) &&
                           std::find(caps.kv_dtypes.begin(), caps.kv_dtypes.end(), c.dtype) != caps.kv_dtypes.end();
    if (!supported) continue;
    const float err = run_case(c, 1000 + static_cast<uint32_t>(i), backend);
    EXPECT_LE(err, low.for_case(c)) << "case " << i << ": head_dim " << c.head_dim << " gqa " << c.gqa << " page "
                               << c.block_size << " dtype " << dtype_name(c.dtype) << " packed " << c.packed
                               << " max_context " << c.max_context;
    ++cases;
  }
  EXPECT_GE(cases, 27) << "too few cases fit the declared capabilities to mean anything";
}

// Many long rows at once (130 single-query rows of up to 9000 keys, 32 query heads over 4 KV
// heads, bf16): the longest partitions and, on backends with bounded scratch, several row slices.
inline void check_long_rows(AttentionBackend& backend) {
  Case c;
  c.head_dim = 128;
  c.gqa = 8;
  c.kv_heads = 4;
  c.block_size = 16;
  c.max_context = 9000;
  c.seqs = 130;
  c.dtype = DType::kBF16;
  c.packed = false;
  c.pad = -1;
  EXPECT_LE(run_case(c, 77, backend), kTolerance);
}

// Packed sequences of up to 100 query rows (prefill chunks of every size around tile edges) over
// head dims 8..256, GQA and every K/V dtype.
inline void check_long_packed(AttentionBackend& backend, const LowPrecisionPrefill& low = {}) {
  const int32_t head_dims[] = {8, 64, 136, 256};
  const DType dtypes[] = {DType::kBF16, DType::kF16, DType::kF32, DType::kBF16};
  for (int i = 0; i < 4; ++i) {
    Case c;
    c.head_dim = head_dims[i];
    c.gqa = i % 2 == 0 ? 4 : 1;
    c.kv_heads = 2;
    c.block_size = i == 1 ? 1 : 16;
    c.max_context = 700;
    c.seqs = 4;
    c.dtype = dtypes[i];
    c.packed = true;
    c.pad = -1;
    c.max_q_rows = 100;
    EXPECT_LE(run_case(c, 500 + static_cast<uint32_t>(i), backend), low.for_case(c)) << "head_dim " << c.head_dim;
  }
}

// The same query rows, once as one packed sequence and once as single-query rows with their
// own causal lengths, give the same output within the tolerance.
inline void check_packed_equals_per_row(AttentionBackend& backend, float tolerance = kTolerance) {
  std::mt19937 rng(5);
  const int32_t d = 64, kvh = 2, q_heads = 4, bs = 16, len = 77, n = 9, blocks = 8;
  PagedPools pools(DType::kBF16, blocks, bs, kvh, d, rng);
  std::vector<int32_t> table = random_tables({len}, bs, blocks, 5, -1, rng);
  std::vector<float> q(static_cast<size_t>(n * q_heads * d));
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);
  std::vector<float> packed(q.size()), per_row(q.size());
  std::vector<int32_t> cu = {0, n}, lengths = {len};
  AttentionParams p;
  p.q = q.data();
  p.out = packed.data();
  p.rows = n;
  p.num_q_heads = q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = table.data();
  p.table_width = 5;
  p.context_lengths = lengths.data();
  p.num_seqs = 1;
  p.cu_seqlens_q = cu.data();
  p.max_seqlen_q = n;
  ASSERT_TRUE(run_attention(backend, p).ok());
  std::vector<int32_t> tables, row_lengths;
  for (int32_t j = 0; j < n; ++j) {
    tables.insert(tables.end(), table.begin(), table.end());
    row_lengths.push_back(len - n + j + 1);
  }
  p.out = per_row.data();
  p.block_tables = tables.data();
  p.context_lengths = row_lengths.data();
  p.num_seqs = n;
  p.cu_seqlens_q = nullptr;
  p.max_seqlen_q = 1;
  ASSERT_TRUE(run_attention(backend, p).ok());
  for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(packed[i], per_row[i], tolerance) << i;
}

// Declared `deterministic`: a row computed alone is bit-identical to the same row in a batch.
inline void check_row_independent(AttentionBackend& backend) {
  std::mt19937 rng(11);
  const int32_t d = 128, kvh = 2, q_heads = 8, bs = 16, blocks = 400;
  PagedPools pools(DType::kF16, blocks, bs, kvh, d, rng);
  const std::vector<int32_t> lengths = {3000, 17, 1500, 400};
  const int32_t width = 190;
  std::vector<int32_t> tables = random_tables(lengths, bs, blocks, width, 0, rng);
  std::vector<float> q(lengths.size() * q_heads * d);
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);
  std::vector<float> batch(q.size()), alone(static_cast<size_t>(q_heads * d));
  AttentionParams p;
  p.q = q.data();
  p.out = batch.data();
  p.rows = 4;
  p.num_q_heads = q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = tables.data();
  p.table_width = width;
  p.context_lengths = lengths.data();
  p.num_seqs = 4;
  ASSERT_TRUE(run_attention(backend, p).ok());
  for (int64_t s = 0; s < 4; ++s) {
    AttentionParams one = p;
    one.q = q.data() + s * q_heads * d;
    one.out = alone.data();
    one.rows = one.num_seqs = 1;
    one.block_tables = tables.data() + s * width;
    one.context_lengths = lengths.data() + s;
    ASSERT_TRUE(run_attention(backend, one).ok());
    for (int64_t i = 0; i < q_heads * d; ++i) ASSERT_EQ(alone[i], batch[s * q_heads * d + i]) << "row " << s;
  }
}

}  // namespace rlt::attention::testing

// The backend equivalence checks, shared by the CPU attention tests and the GPU tests: each
// runs a backend against cpu_reference (or against itself) on randomized paged batches.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
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
  int32_t pad;             // -1, 0, or -2 for stale-but-valid ids
  int32_t max_q_rows = 9;  // packed: query rows per sequence drawn from 1 .. this
};

// Tolerance: both backends read identical K/V values (bf16/f16 widen exactly) and compute in f32;
// they differ only in summation order (tiles, online rescaling, split-K merge). With N(0,1) data
// and softmax-weighted averages of magnitude <= ~4, that is a few f32 ulps: 1e-5 absolute holds
// for every dtype; any indexing, masking or merge bug gives errors near 1.
constexpr float kTolerance = 1e-5f;

// Packed prefill a backend runs on tensor cores rounds Q and the probabilities to the 16-bit K/V
// type (as FlashAttention does): those cases — packed, 16-bit K/V, one of `head_dims` — are held
// to `tolerance` instead (the backend's test states where it comes from). A backend that rounds
// single-query rows the same way sets `single_query_rows`; `f16_tolerance`, when set, holds f16
// cases to their own (smaller) bound.
struct LowPrecisionPrefill {
  std::vector<int32_t> head_dims;  // empty: every case is held to kTolerance
  float tolerance = kTolerance;
  bool single_query_rows = false;
  float f16_tolerance = -1.0f;

  bool applies(const Case& c) const {
    return (c.packed || single_query_rows) && c.dtype != DType::kF32 &&
           std::find(head_dims.begin(), head_dims.end(), c.head_dim) != head_dims.end();
  }
  float for_case(const Case& c) const {
    if (!applies(c)) return kTolerance;
    return c.dtype == DType::kF16 && f16_tolerance >= 0 ? f16_tolerance : tolerance;
  }
};

// `inspect`, when given, sees the call (host pointers) before the backend runs it.
inline float run_case(const Case& c, uint32_t seed, AttentionBackend& backend,
                      const std::function<void(const AttentionParams&)>& inspect = nullptr) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> len_dist(1, c.max_context);
  std::vector<int32_t> lengths(static_cast<size_t>(c.seqs)), q_rows(lengths.size());
  int64_t rows = 0, max_q = 1;
  for (size_t s = 0; s < lengths.size(); ++s) {
    lengths[s] = len_dist(rng);
    q_rows[s] = c.packed ? std::uniform_int_distribution<int32_t>(
                               1, std::min(lengths[s], c.max_q_rows))(rng)
                         : 1;
    rows += q_rows[s];
    max_q = std::max<int64_t>(max_q, q_rows[s]);
  }
  int32_t width = 0;
  for (int32_t l : lengths) width = std::max(width, (l + c.block_size - 1) / c.block_size);
  width += 1;  // extra padding column
  const int32_t blocks = std::max(width + 8, 16);
  PagedPools pools(c.dtype, blocks, c.block_size, c.kv_heads, c.head_dim, rng);
  // Rows at mixed depths read different planes: each sequence gets its own random table.
  const std::vector<int32_t> tables =
      random_tables(lengths, c.block_size, blocks, width, c.pad, rng);
  std::vector<int32_t> cu(1, 0);
  for (int32_t n : q_rows) cu.push_back(cu.back() + n);
  const int32_t q_heads = c.kv_heads * c.gqa;
  std::vector<float> q(static_cast<size_t>(rows * q_heads * c.head_dim));
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);
  std::vector<float> expected(q.size(), NAN), actual(q.size(), NAN);
  AttentionParams p = paged_params(pools, q.data(), nullptr, rows, q_heads, tables.data(), width,
                                   lengths.data(), c.seqs);
  p.cu_seqlens_q = c.packed ? cu.data() : nullptr;
  p.max_seqlen_q = static_cast<int32_t>(max_q);
  auto reference = make_cpu_reference_backend();
  p.out = expected.data();
  EXPECT_TRUE(run_attention(*reference, p).ok());
  p.out = actual.data();
  if (inspect) inspect(p);
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
// A backend limited to 16-bit K/V, head_dim <= 128 and power-of-two pages (cudnn) fits 15 of the
// 36 cases.
inline void check_random_batches(const BackendCapabilities& caps, AttentionBackend& backend,
                                 const LowPrecisionPrefill& low = {}, int min_cases = 27) {
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
    const bool supported =
        caps.head_dim.accepts(c.head_dim) && caps.page_size.accepts(c.block_size) &&
        caps.gqa_ratio.accepts(c.gqa) &&
        std::find(caps.kv_dtypes.begin(), caps.kv_dtypes.end(), c.dtype) != caps.kv_dtypes.end();
    if (!supported) continue;
    const float err = run_case(c, 1000 + static_cast<uint32_t>(i), backend);
    EXPECT_LE(err, low.for_case(c))
        << "case " << i << ": head_dim " << c.head_dim << " gqa " << c.gqa << " page "
        << c.block_size << " dtype " << dtype_name(c.dtype) << " packed " << c.packed
        << " max_context " << c.max_context;
    ++cases;
  }
  EXPECT_GE(cases, min_cases) << "too few cases fit the declared capabilities to mean anything";
}

// Many long rows at once (130 single-query rows of up to 9000 keys, 32 query heads over 4 KV
// heads, bf16): the longest partitions and, on backends with bounded scratch, several row slices.
inline void check_long_rows(AttentionBackend& backend, float tolerance = kTolerance) {
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
  EXPECT_LE(run_case(c, 77, backend), tolerance);
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
    EXPECT_LE(run_case(c, 500 + static_cast<uint32_t>(i), backend), low.for_case(c))
        << "head_dim " << c.head_dim;
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
  AttentionParams p =
      paged_params(pools, q.data(), packed.data(), n, q_heads, table.data(), 5, lengths.data(), 1);
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

// A count of OpenMP threads while alive, so that what a backend does only with threads to spare
// (cpu_flash splits tasks by heads when it has fewer tasks than threads) runs on any machine.
class OmpThreads {
 public:
  explicit OmpThreads(int n) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_ = omp_get_max_threads();
};
// Thread counts the bit-identity checks run at: one task per thread and fewer or more tasks.
inline constexpr int kCheckedThreadCounts[] = {1, 2, 3, 8};

// The query row at `q` run alone (decode) over the first `len` keys of the sequence whose table
// starts at `table`, with the pools and heads of the packed call `p`, into `out`.
inline Status run_row_alone(AttentionBackend& backend, const AttentionParams& p, const float* q,
                            const int32_t* table, const int32_t& len, float* out) {
  AttentionParams one = p;
  one.q = q;
  one.out = out;
  one.rows = one.num_seqs = 1;
  one.block_tables = table;
  one.context_lengths = &len;
  one.cu_seqlens_q = nullptr;
  one.max_seqlen_q = 1;
  return run_attention(backend, one);
}

// Declared `deterministic`, and what speculative verification and chunked prefill rely on: a
// query row packed with other rows of its sequence is bit-identical to the same row decoded
// alone, also past the lengths where single-query rows split their keys (cpu_flash: 256) — rows
// that cross 512 and 1024 keys — and below them (cpu_flash splits a lone short row by heads when
// threads are idle), GQA, bf16 pools.
inline void check_packed_bit_equal_per_row(AttentionBackend& backend, int32_t d) {
  SCOPED_TRACE(::testing::Message() << "head_dim " << d);
  std::mt19937 rng(23);
  const int32_t kvh = 2, q_heads = 6, bs = 16, blocks = 200, width = 80;
  PagedPools pools(DType::kBF16, blocks, bs, kvh, d, rng);
  // Sequence 0: 16 rows at positions 500..515; sequence 1: 12 rows ending at 1100; sequence 2:
  // 5 rows ending at 1024 exactly; sequence 3: 3 rows ending at 150.
  const std::vector<int32_t> lengths = {516, 1100, 1024, 150}, rows = {16, 12, 5, 3};
  std::vector<int32_t> tables = random_tables(lengths, bs, blocks, width, 0, rng);
  std::vector<int32_t> first_row = {0};
  for (int32_t r : rows) first_row.push_back(first_row.back() + r);
  std::vector<float> q(static_cast<size_t>(first_row.back() * q_heads * d));
  std::normal_distribution<float> dist;
  for (float& x : q) x = 2 * dist(rng);
  // The sequences `seqs` packed into one call, each row then checked against itself alone.
  auto check = [&](const std::vector<int32_t>& seqs) {
    std::vector<float> pq, packed;
    std::vector<int32_t> cu = {0}, lens, seq_tables;
    for (int32_t s : seqs) {
      const auto at = static_cast<size_t>(first_row[static_cast<size_t>(s)]) * q_heads * d;
      pq.insert(pq.end(), q.begin() + static_cast<std::ptrdiff_t>(at),
                q.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(rows[static_cast<size_t>(s)]) * q_heads * d));
      cu.push_back(cu.back() + rows[static_cast<size_t>(s)]);
      lens.push_back(lengths[static_cast<size_t>(s)]);
      seq_tables.insert(seq_tables.end(), tables.begin() + s * width, tables.begin() + (s + 1) * width);
    }
    packed.resize(pq.size());
    std::vector<float> alone(static_cast<size_t>(q_heads * d));
    AttentionParams p = paged_params(pools, pq.data(), packed.data(), cu.back(), q_heads, seq_tables.data(), width,
                                     lens.data(), static_cast<int64_t>(seqs.size()));
    p.cu_seqlens_q = cu.data();
    p.max_seqlen_q = 16;
    ASSERT_TRUE(run_attention(backend, p).ok());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int32_t n = cu[i + 1] - cu[i];
      for (int32_t j = 0; j < n; ++j) {
        const int32_t row = cu[i] + j;
        const int32_t len = lens[i] - n + j + 1;
        ASSERT_TRUE(run_row_alone(backend, p, pq.data() + static_cast<size_t>(row) * q_heads * d,
                                  seq_tables.data() + i * width, len, alone.data())
                        .ok());
        for (int64_t e = 0; e < q_heads * d; ++e)
          ASSERT_EQ(alone[static_cast<size_t>(e)], packed[static_cast<size_t>(row) * q_heads * d + e])
              << "sequence " << seqs[i] << " row " << j << " (" << len << " keys), element " << e;
      }
    }
  };
  for (const int threads : kCheckedThreadCounts) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const OmpThreads scope(threads);
    check({0, 1, 2, 3});
    check({2});  // a few rows alone: one task, split by heads over the threads
    check({3});
    check({1});
  }
}

// At both head sizes whose prefill blocks cpu_flash scores with the pairs in the vector lanes on
// AVX-512 (sequence 0's 16 rows x 3 query heads of a KV head: three groups of 16 pairs).
inline void check_packed_bit_equal_per_row(AttentionBackend& backend) {
  check_packed_bit_equal_per_row(backend, 64);
  check_packed_bit_equal_per_row(backend, 128);
}

// A key a row may not see contributes nothing, whatever K and V hold there: a NaN in the K and an
// Inf in the V of a sequence's second-to-last key (seen by its last two rows only) leave every
// earlier row of the packed call finite and bit-identical to the row alone (0 · Inf would be NaN,
// and so would a NaN score that escaped the mask). cpu_flash groups the (row, head) pairs of a KV
// head four at a time for values (with 3 query heads per KV head, rows 2 and 3 share a group) and
// three at a time for scores (with 1, rows 0-2 and 3-4 do).
inline void check_masked_values_do_not_leak(AttentionBackend& backend) {
  // GQA 3 (a row's query heads of a KV head fill a score group) and 1 (groups mix rows, so the
  // poisoned key is scored for rows that may not see it, then masked).
  for (const int32_t q_heads : {6, 2}) {
    std::mt19937 rng(29);
    const int32_t d = 64, kvh = 2, bs = 16, blocks = 16, width = 8;
    PagedPools pools(DType::kBF16, blocks, bs, kvh, d, rng);
    const std::vector<int32_t> lengths = {100};
    const int32_t rows = 5;
    std::vector<int32_t> tables = random_tables(lengths, bs, blocks, width, 0, rng);
    const int32_t key = lengths[0] - 2;
    const int64_t at = tables[static_cast<size_t>(key / bs)] * pools.v.block_stride + (key % bs) * pools.v.token_stride;
    for (int64_t e = 0; e < kvh * d; ++e) {
      pools.vh[static_cast<size_t>(at + e)] = 0x7F80;  // +Inf in bf16
      pools.kh[static_cast<size_t>(at + e)] = 0x7FC0;  // NaN in bf16
    }
    std::vector<float> q(static_cast<size_t>(rows * q_heads * d));
    std::normal_distribution<float> dist;
    for (float& x : q) x = dist(rng);
    std::vector<float> packed(q.size()), alone(static_cast<size_t>(q_heads * d));
    const std::vector<int32_t> cu = {0, rows};
    for (const int threads : kCheckedThreadCounts) {
      const OmpThreads scope(threads);
      AttentionParams p =
          paged_params(pools, q.data(), packed.data(), rows, q_heads, tables.data(), width, lengths.data(), 1);
      p.cu_seqlens_q = cu.data();
      p.max_seqlen_q = rows;
      ASSERT_TRUE(run_attention(backend, p).ok());
      for (int32_t j = 0; j + 2 < rows; ++j) {
        const int32_t len = lengths[0] - rows + j + 1;
        ASSERT_TRUE(
            run_row_alone(backend, p, q.data() + static_cast<size_t>(j) * q_heads * d, tables.data(), len, alone.data())
                .ok());
        for (int64_t e = 0; e < q_heads * d; ++e) {
          const float x = packed[static_cast<size_t>(j) * q_heads * d + e];
          ASSERT_TRUE(std::isfinite(x)) << q_heads << " query heads, " << threads << " threads, row " << j
                                        << ", element " << e;
          ASSERT_EQ(alone[static_cast<size_t>(e)], x)
              << q_heads << " query heads, " << threads << " threads, row " << j << ", element " << e;
        }
      }
    }
  }
}

// Declared `deterministic`: a row computed alone is bit-identical to the same row in a batch.
inline void check_row_independent(AttentionBackend& backend) {
  std::mt19937 rng(11);
  const int32_t d = 128, kvh = 2, q_heads = 8, bs = 16, blocks = 400;
  PagedPools pools(DType::kF16, blocks, bs, kvh, d, rng);
  // 200 keys: a lone row short of a split, which cpu_flash runs as tasks by heads; 600: three
  // ranges, also split by heads when threads outnumber them.
  const std::vector<int32_t> lengths = {3000, 17, 1500, 400, 200, 600};
  const auto seqs = static_cast<int32_t>(lengths.size());
  const int32_t width = 190;
  std::vector<int32_t> tables = random_tables(lengths, bs, blocks, width, 0, rng);
  std::vector<float> q(lengths.size() * q_heads * d);
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);
  std::vector<float> batch(q.size()), alone(static_cast<size_t>(q_heads * d));
  AttentionParams p = paged_params(pools, q.data(), batch.data(), seqs, q_heads, tables.data(), width,
                                   lengths.data(), seqs);
  for (const int threads : kCheckedThreadCounts) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const OmpThreads scope(threads);
    ASSERT_TRUE(run_attention(backend, p).ok());
    for (int64_t s = 0; s < seqs; ++s) {
      AttentionParams one = p;
      one.q = q.data() + s * q_heads * d;
      one.out = alone.data();
      one.rows = one.num_seqs = 1;
      one.block_tables = tables.data() + s * width;
      one.context_lengths = lengths.data() + s;
      ASSERT_TRUE(run_attention(backend, one).ok());
      for (int64_t i = 0; i < q_heads * d; ++i)
        ASSERT_EQ(alone[i], batch[s * q_heads * d + i]) << "row " << s;
    }
  }
}

// The causal and context boundaries, planted so that a mistake of one key moves an output by
// about 2 instead of a few rounding errors. Every query is (8, 0, ...) and the key at position t is
// (8t, 0, ...): the scores 8t are exact as stored in every dtype (a backend that pre-scales Q may
// round them by a few parts in a thousand) and rise by 8 per position, so each row is
// dominated (to within e^-8) by the last key it may see, whose value is (-1)^t in every dimension.
// Keys past a sequence's context, in its last page and in the pages its table names beyond it,
// score higher still and hold 5. A row at position P must therefore give (-1)^P: seeing one key
// too many gives -(-1)^P or 5, one too few -(-1)^P. Sequences: a 9-row chunk after 31 keys of
// context (rows cross a page edge), a 16-row prefill filling exactly one page, single-row decodes
// ending mid-page and at a page's last slot; packed and as single-query rows; GQA 2.
inline void check_causal_boundaries(AttentionBackend& backend, DType dtype, float tolerance) {
  const int32_t d = 64, kv_heads = 1, q_heads = 2, bs = 16, width = 4, blocks = 24;
  std::mt19937 rng(13);
  PagedPools pools(dtype, blocks, bs, kv_heads, d, rng);
  struct Seq {
    int32_t rows, length;
  };
  const std::vector<Seq> seqs = {{9, 40}, {16, 16}, {1, 33}, {1, 48}};
  // Each sequence owns `width` distinct blocks in a shuffled order; the whole table is valid ids.
  // Block 0 and the other blocks no table lists hold only poison (a backend that maps padding to
  // some block, as cudnn does to block 0, must still never let it through its masks).
  std::vector<int32_t> ids(static_cast<size_t>(blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> tables(ids.begin(), ids.begin() + static_cast<int64_t>(seqs.size()) * width);
  const auto store = [&](std::vector<float>& f, std::vector<uint16_t>& h, int64_t at, float x) {
    f[static_cast<size_t>(at)] = x;
    if (dtype == DType::kBF16) h[static_cast<size_t>(at)] = f32_to_bf16(x);
    if (dtype == DType::kF16) h[static_cast<size_t>(at)] = f32_to_f16(x);
  };
  for (int32_t block = 0; block < blocks; ++block) {
    if (std::find(tables.begin(), tables.end(), block) != tables.end()) continue;
    for (int32_t slot = 0; slot < bs; ++slot) {
      const int64_t at = block * pools.k.block_stride + slot * pools.k.token_stride;
      for (int32_t i = 0; i < d; ++i) {
        store(pools.kf, pools.kh, at + i, i == 0 ? 1600.0f : 0.0f);
        store(pools.vf, pools.vh, at + i, 5.0f);
      }
    }
  }
  std::vector<int32_t> lengths, cu = {0};
  std::vector<float> expected;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int32_t t = 0; t < width * bs; ++t) {
      const int64_t at = kv_offset(pools.k, tables.data() + s * width, t, 0);
      const bool inside = t < seqs[s].length;
      for (int32_t i = 0; i < d; ++i) {
        store(pools.kf, pools.kh, at + i,
              i == 0 ? 8.0f * static_cast<float>(inside ? t : 200) : 0.0f);
        store(pools.vf, pools.vh, at + i, inside ? (t % 2 ? -1.0f : 1.0f) : 5.0f);
      }
    }
    lengths.push_back(seqs[s].length);
    cu.push_back(cu.back() + seqs[s].rows);
    for (int32_t j = 0; j < seqs[s].rows; ++j) {
      const int32_t position = seqs[s].length - seqs[s].rows + j;
      expected.push_back(position % 2 ? -1.0f : 1.0f);
    }
  }
  const int64_t rows = cu.back();
  std::vector<float> q(static_cast<size_t>(rows * q_heads * d), 0.0f);
  for (int64_t r = 0; r < rows * q_heads; ++r) q[static_cast<size_t>(r * d)] = 8.0f;
  std::vector<float> out(q.size());
  AttentionParams p = paged_params(pools, q.data(), out.data(), rows, q_heads, tables.data(), width,
                                   lengths.data(), static_cast<int64_t>(seqs.size()));
  p.cu_seqlens_q = cu.data();
  p.max_seqlen_q = 16;
  const auto check = [&](const char* how, const std::vector<float>& want) {
    std::fill(out.begin(), out.end(), NAN);
    const Status st = run_attention(backend, p);
    ASSERT_TRUE(st.ok()) << how << ": " << st.to_string();
    for (int64_t r = 0; r < p.rows; ++r) {
      for (int64_t i = 0; i < q_heads * d; ++i) {
        ASSERT_NEAR(out[static_cast<size_t>(r * q_heads * d + i)], want[static_cast<size_t>(r)],
                    tolerance)
            << how << " row " << r << " element " << i << " (" << dtype_name(dtype) << ")";
      }
    }
  };
  check("packed", expected);
  // The same rows as single-query sequences, each with its own causal length.
  std::vector<int32_t> row_tables, row_lengths;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int32_t j = 0; j < seqs[s].rows; ++j) {
      row_tables.insert(row_tables.end(), tables.begin() + static_cast<int64_t>(s) * width,
                        tables.begin() + static_cast<int64_t>(s + 1) * width);
      row_lengths.push_back(seqs[s].length - seqs[s].rows + j + 1);
    }
  }
  p.block_tables = row_tables.data();
  p.context_lengths = row_lengths.data();
  p.num_seqs = rows;
  p.cu_seqlens_q = nullptr;
  p.max_seqlen_q = 1;
  check("single-query rows", expected);
}

}  // namespace rlt::attention::testing

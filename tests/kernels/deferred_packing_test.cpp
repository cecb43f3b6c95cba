// Packing deferred (PackOptions::rows_in_place): the kernel computes from the source rows, and
// must give the packed kernel's results bit for bit before, during and after the packing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <hwy/targets.h>

#include "common/half.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/packed_matrix.h"
#include "simd_targets.h"

namespace rlt::kernels {
namespace {

struct Rows {
  std::vector<uint16_t> bits;
  WeightMatrix view;
};

Rows random_rows(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Rows r;
  r.bits.resize(static_cast<size_t>(rows * cols));
  for (uint16_t& b : r.bits)
    b = dtype == DType::kBF16 ? f32_to_bf16(dist(rng)) : f32_to_f16(dist(rng));
  r.view = {dtype, rows, cols, r.bits.data()};
  return r;
}

std::vector<float> run(const PackedMatrix& w, const std::vector<float>& x, int64_t m) {
  std::vector<float> y(static_cast<size_t>(m * w.outputs()));
  linear(x.data(), m, w, y.data());
  return y;
}

std::vector<float> random_input(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = dist(rng);
  return x;
}

// The three ways a model's matrices are packed, deferred and not.
struct Pair {
  PackedMatrix packed, deferred;
};

class DeferredPacking : public ::testing::TestWithParam<DType> {};

// Columns: below one 8-wide transpose, not a multiple of 8, across the 128-column blocks and
// their prefetch distance; outputs: partial and several panels; rows: every row tile and tails.
void check_equals_packed(DType dtype) {
  std::mt19937 rng(2024);
  const PackOptions deferred{.rows_in_place = true};
  for (int64_t cols : {1, 7, 8, 130, 257, 300, 1000}) {
    for (int64_t n : {1, 63, 64, 150}) {
      Rows a = random_rows(dtype, n, cols, rng), b = random_rows(dtype, 5, cols, rng),
           c = random_rows(dtype, n, cols, rng);
      std::vector<Pair> pairs;
      pairs.push_back({PackedMatrix::pack(a.view), PackedMatrix::pack(a.view, deferred)});
      pairs.push_back({PackedMatrix::pack_concat({a.view, b.view, c.view}),
                       PackedMatrix::pack_concat({a.view, b.view, c.view}, deferred)});
      pairs.push_back({PackedMatrix::pack_swiglu(a.view, c.view),
                       PackedMatrix::pack_swiglu(a.view, c.view, deferred)});
      for (const Pair& p : pairs) {
        ASSERT_NE(p.deferred.pending_rows(), nullptr);
        ASSERT_EQ(p.deferred.data(), nullptr);
        EXPECT_EQ(p.deferred.bytes(), p.packed.bytes());
        for (int64_t m : {1, 2, 6, 7, 13}) {
          const std::vector<float> x = random_input(m, cols, rng);
          ASSERT_EQ(run(p.deferred, x, m), run(p.packed, x, m))
              << "cols " << cols << " n " << n << " m " << m;
        }
        p.deferred.complete_packing();
        ASSERT_EQ(p.deferred.pending_rows(), nullptr);
        ASSERT_NE(p.deferred.data(), nullptr);
        // The bytes are the packer's: a cache written from them is the one packing writes.
        ASSERT_EQ(
            std::memcmp(p.deferred.data(), p.packed.data(), static_cast<size_t>(p.packed.bytes())),
            0);
        const std::vector<float> x = random_input(3, cols, rng);
        ASSERT_EQ(run(p.deferred, x, 3), run(p.packed, x, 3));
        p.deferred.complete_packing();  // nothing left to do
      }
    }
  }
}

TEST_P(DeferredPacking, EqualsThePackedKernelBitForBitBeforeAndAfterPacking) {
  check_equals_packed(GetParam());
}

// Every SIMD target compiled in and supported here: their vectors split a panel differently
// (16, 8 or 4 lanes; slices of 4 vectors).
TEST_P(DeferredPacking, EveryCompiledTargetEqualsItsPackedKernel) {
  for_each_simd_target([this](int64_t target) {
    ASSERT_EQ(cpu_dispatch_target(), hwy::TargetName(target));
    check_equals_packed(GetParam());
  });
}

TEST_P(DeferredPacking, CopiesSharePackingDoneOnAnyOfThem) {
  std::mt19937 rng(3);
  Rows a = random_rows(GetParam(), 70, 40, rng);
  const PackedMatrix m = PackedMatrix::pack(a.view, {.rows_in_place = true});
  const PackedMatrix copy = m;
  copy.complete_packing();
  EXPECT_EQ(m.pending_rows(), nullptr);
  EXPECT_EQ(m.data(), copy.data());
}

// A forward pass running while another thread packs: every call reads the rows or the bytes,
// and every result is the packed one.
TEST_P(DeferredPacking, ResultsDoNotChangeWhilePackingRunsConcurrently) {
  std::mt19937 rng(17);
  const int64_t n = 640, cols = 520, m = 3;
  Rows a = random_rows(GetParam(), n, cols, rng);
  const PackedMatrix packed = PackedMatrix::pack(a.view);
  const std::vector<float> x = random_input(m, cols, rng);
  const std::vector<float> expected = run(packed, x, m);
  for (int round = 0; round < 4; ++round) {
    const PackedMatrix deferred = PackedMatrix::pack(a.view, {.rows_in_place = true});
    std::atomic<bool> done{false};
    std::thread packer([&] {
      deferred.complete_packing();
      done = true;
    });
    int calls = 0;
    while (!done || calls < 2) {
      ASSERT_EQ(run(deferred, x, m), expected) << "call " << calls;
      ++calls;
    }
    packer.join();
    EXPECT_EQ(deferred.pending_rows(), nullptr);
  }
}

TEST(DeferredPackingRefused, WhatPackingConvertsIsPackedAtOnce) {
  std::mt19937 rng(5);
  Rows a = random_rows(DType::kBF16, 8, 16, rng), h = random_rows(DType::kF16, 8, 16, rng);
  std::vector<float> f32(8 * 16, 0.5f);
  const WeightMatrix f{DType::kF32, 8, 16, f32.data()};
  const PackOptions deferred{.rows_in_place = true};
  // Mixed dtypes are widened to f32 and f32 rows are not 16-bit: both packed at once.
  EXPECT_EQ(PackedMatrix::pack_concat({a.view, h.view}, deferred).pending_rows(), nullptr);
  EXPECT_EQ(PackedMatrix::pack(f, deferred).pending_rows(), nullptr);
  EXPECT_NE(PackedMatrix::pack(f, deferred).data(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(HalfTypes, DeferredPacking, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlt::kernels

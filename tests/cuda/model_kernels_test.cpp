// The GPU model kernels and linear layers against the CPU ops (kernels/cpu/ops.h) and float64.
// Tolerances: same f32 formulas in a different summation order — relative 1e-5 for row
// reductions of up to 4096 terms (~ sqrt(n)·2⁻²⁴ growth with margin); RoPE uses the device's
// sinf/cosf (≤ 2 ulp), so rotated values are held to 1e-5 absolute on N(0,1) data.
#include "cuda/model_kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "cuda/linear.h"
#include "device_buffer.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace rlt::cuda {
namespace {

using testing::Dev;

std::vector<float> normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * (1.0f + std::fabs(want[i]))) << what << " element " << i;
  }
}

TEST(GpuModelKernels, NormsResidualsGateAndSwiGluMatchTheCpuOps) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 5, n = 2048, inter = 700;
  const auto x = normal(rows * n, 1), w = normal(n, 2), h0 = normal(rows * n, 3),
             gu = normal(rows * 2 * inter, 4);
  Dev<float> dx(x), dw(w), dh(h0), dy(rows * n), dgu(gu), dact(rows * inter), dgate(rows);
  ASSERT_TRUE(rms_norm(dx.p(), dw.p(), rows, n, 1e-6f, dy.p(), nullptr).ok());
  std::vector<float> want(rows * n);
  kernels::rms_norm(x.data(), w.data(), rows, n, 1e-6f, want.data());
  expect_close(dy.read(rows * n), want, 1e-5f, "rms_norm");

  ASSERT_TRUE(add_rms_norm(dh.p(), dx.p(), dw.p(), rows, n, 1e-6f, nullptr).ok());
  std::vector<float> h = h0;
  kernels::add_rms_norm(h.data(), x.data(), w.data(), rows, n, 1e-6f);
  expect_close(dh.read(rows * n), h, 1e-5f, "add_rms_norm");

  ASSERT_TRUE(silu_mul(dgu.p(), rows, inter, dact.p(), ElementType::kF32, nullptr).ok());
  std::vector<float> act(rows * inter);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inter; ++i) {
      const float g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
      act[r * inter + i] = g * kernels::sigmoid(g) * u;
    }
  expect_close(dact.read(rows * inter), act, 1e-5f, "silu_mul");

  ASSERT_TRUE(gate_logits(dx.p(), dw.p(), 0.25f, rows, n, dgate.p(), nullptr).ok());
  std::vector<float> gate(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += double(x[r * n + i]) * w[i];
    gate[r] = static_cast<float>(dot + 0.25);
  }
  expect_close(dgate.read(rows), gate, 1e-4f, "gate logits");
}

// The fused residual + next norm is bit-identical to the two kernels it replaces, also in place
// (the loop's final norm overwrites h).
TEST(GpuModelKernels, FusedResidualAndNormEqualsTheTwoKernels) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 5;
  for (int64_t n : {int64_t{2048}, int64_t{1000}}) {  // 1000: a partial last pass per thread
    const auto x = normal(rows * n, 21), w = normal(n, 22), w2 = normal(n, 23),
               h0 = normal(rows * n, 24);
    for (bool in_place : {false, true}) {
      Dev<float> dx(x), dw(w), dw2(w2), h_fused(h0), h_split(h0), y_fused(rows * n),
          y_split(rows * n);
      float* fused_out = in_place ? h_fused.p() : y_fused.p();
      float* split_out = in_place ? h_split.p() : y_split.p();
      ASSERT_TRUE(add_rms_norm_then_norm(h_fused.p(), dx.p(), dw.p(), dw2.p(), rows, n, 1e-6f,
                                         fused_out, ElementType::kF32, nullptr)
                      .ok());
      ASSERT_TRUE(add_rms_norm(h_split.p(), dx.p(), dw.p(), rows, n, 1e-6f, nullptr).ok());
      ASSERT_TRUE(rms_norm(h_split.p(), dw2.p(), rows, n, 1e-6f, split_out, nullptr).ok());
      EXPECT_EQ(h_fused.read(rows * n), h_split.read(rows * n))
          << "n " << n << " in place " << in_place;
      if (!in_place) {
        EXPECT_EQ(y_fused.read(rows * n), y_split.read(rows * n)) << "n " << n;
      }
    }
  }
}

// Producers that write a 16-bit GEMM input directly store exactly what convert_from_f32 makes of
// their f32 output.
TEST(GpuModelKernels, SixteenBitOutputsEqualConvertedF32Outputs) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 3, n = 2048, inter = 700;
  const auto x = normal(rows * n, 31), w = normal(n, 32), w2 = normal(n, 33),
             h0 = normal(rows * n, 34), gu = normal(rows * 2 * inter, 35);
  for (ElementType type : {ElementType::kBF16, ElementType::kF16}) {
    Dev<float> dx(x), dw(w), dw2(w2), dgu(gu), f32_out(rows * n), f32_act(rows * inter);
    Dev<float> h_a(h0), h_b(h0);
    Dev<uint16_t> direct(rows * n), converted(rows * n), act_direct(rows * inter),
        act_converted(rows * inter);
    ASSERT_TRUE(rms_norm_to(dx.p(), dw.p(), rows, n, 1e-6f, direct.p(), type, nullptr).ok());
    ASSERT_TRUE(rms_norm(dx.p(), dw.p(), rows, n, 1e-6f, f32_out.p(), nullptr).ok());
    ASSERT_TRUE(convert_from_f32(f32_out.p(), type, converted.p(), rows * n, nullptr).ok());
    EXPECT_EQ(direct.read(rows * n), converted.read(rows * n)) << "rms_norm_to";
    ASSERT_TRUE(add_rms_norm_then_norm(h_a.p(), dx.p(), dw.p(), dw2.p(), rows, n, 1e-6f, direct.p(),
                                       type, nullptr)
                    .ok());
    ASSERT_TRUE(add_rms_norm_then_norm(h_b.p(), dx.p(), dw.p(), dw2.p(), rows, n, 1e-6f,
                                       f32_out.p(), ElementType::kF32, nullptr)
                    .ok());
    ASSERT_TRUE(convert_from_f32(f32_out.p(), type, converted.p(), rows * n, nullptr).ok());
    EXPECT_EQ(direct.read(rows * n), converted.read(rows * n)) << "add_rms_norm_then_norm";
    EXPECT_EQ(h_a.read(rows * n), h_b.read(rows * n))
        << "the residual does not depend on the output type";
    ASSERT_TRUE(silu_mul(dgu.p(), rows, inter, act_direct.p(), type, nullptr).ok());
    ASSERT_TRUE(silu_mul(dgu.p(), rows, inter, f32_act.p(), ElementType::kF32, nullptr).ok());
    ASSERT_TRUE(convert_from_f32(f32_act.p(), type, act_converted.p(), rows * inter, nullptr).ok());
    EXPECT_EQ(act_direct.read(rows * inter), act_converted.read(rows * inter)) << "silu_mul";
  }
}

TEST(GpuModelKernels, RopeWritesQueriesAndPagedKv) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int32_t heads = 4, kv_heads = 2, d = 64, rows = 3, block_size = 4, blocks = 6;
  const int64_t qd = heads * d, kvd = kv_heads * d;
  const auto qkv = normal(rows * (qd + 2 * kvd), 5);
  const std::vector<int32_t> positions = {0, 7, 1000}, write_block = {5, 2, 0},
                             write_slot = {3, 0, 1};
  const auto inv_freq = kernels::Rope::default_inv_freq(d, 10000.0);
  for (ElementType type : {ElementType::kF32, ElementType::kBF16}) {
    const int64_t pool = int64_t{blocks} * block_size * kvd;
    Dev<float> dqkv(qkv), dfreq(inv_freq), dq(rows * qd), kf(pool), vf(pool);
    Dev<int32_t> dpos(positions), dblock(write_block), dslot(write_slot);
    RopeKvWrite a;
    a.qkv = dqkv.p();
    a.rows = rows;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = d;
    a.positions = dpos.p();
    a.inv_freq = dfreq.p();
    a.q_out = dq.p();
    a.k_cache = kf.p();
    a.v_cache = vf.p();
    a.cache_type = type;
    a.block_stride = int64_t{block_size} * kvd;
    a.token_stride = kvd;
    a.head_stride = d;
    a.write_block = dblock.p();
    a.write_slot = dslot.p();
    ASSERT_TRUE(rope_and_write_kv(a, nullptr).ok());
    const kernels::Rope rope(inv_freq);
    const auto q = dq.read(rows * qd);
    const auto kraw = kf.read(pool), vraw = vf.read(pool);
    auto cache_value = [&](const std::vector<float>& raw, int64_t index) {
      if (type == ElementType::kF32) return raw[index];
      const auto* bits = reinterpret_cast<const uint16_t*>(raw.data());
      return bf16_to_f32(bits[index]);
    };
    for (int32_t r = 0; r < rows; ++r) {
      std::vector<float> qr(qkv.begin() + r * (qd + 2 * kvd),
                            qkv.begin() + r * (qd + 2 * kvd) + qd);
      std::vector<float> kr(qkv.begin() + r * (qd + 2 * kvd) + qd,
                            qkv.begin() + r * (qd + 2 * kvd) + qd + kvd);
      rope.apply(qr.data(), heads, positions[r]);
      rope.apply(kr.data(), kv_heads, positions[r]);
      for (int64_t i = 0; i < qd; ++i) ASSERT_NEAR(q[r * qd + i], qr[i], 1e-5f) << "q row " << r;
      const int64_t base =
          int64_t{write_block[r]} * block_size * kvd + int64_t{write_slot[r]} * kvd;
      const float tol = type == ElementType::kF32 ? 1e-5f : 1e-2f;  // bf16 keeps 8 bits
      for (int64_t i = 0; i < kvd; ++i) {
        ASSERT_NEAR(cache_value(kraw, base + i), kr[i], tol * (1 + std::fabs(kr[i])))
            << "k row " << r;
        const float v = qkv[r * (qd + 2 * kvd) + qd + kvd + i];
        const float want = type == ElementType::kF32 ? v : bf16_to_f32(f32_to_bf16(v));
        ASSERT_EQ(cache_value(vraw, base + i), want) << "v row " << r;
      }
    }
  }
}

TEST(GpuLinear, F32IsExactF32AndBf16MatchesRoundedInputs) {
  RLT_REQUIRE_CUDA_DEVICE();
  auto runner = LinearRunner::create(nullptr);
  ASSERT_TRUE(runner.ok());
  const int64_t out = 300, in = 517;
  const auto wf = normal(out * in, 7);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
  for (int64_t rows : {1, 3, 64}) {
    const auto x = normal(rows * in, 8 + static_cast<uint32_t>(rows));
    Dev<float> dx(x), dwf(wf), dy(rows * out);
    Dev<uint16_t> dwb(wb);
    for (ElementType type : {ElementType::kF32, ElementType::kBF16}) {
      DeviceMatrix m;
      m.type = type;
      m.rows = out;
      m.cols = in;
      m.storage =
          std::make_shared<DeviceAllocation>(std::move(type == ElementType::kF32 ? dwf.a : dwb.a));
      ASSERT_TRUE((*runner)->run(m, dx.p(), rows, dy.p()).ok());
      const auto y = dy.read(rows * out);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
          double exact = 0, magnitude = 0;
          for (int64_t i = 0; i < in; ++i) {
            const float w =
                type == ElementType::kF32 ? wf[o * in + i] : bf16_to_f32(wb[o * in + i]);
            // 16-bit weights with several rows: cuBLAS sees the activations rounded to bf16.
            const float xv = (type == ElementType::kBF16 && rows > 1)
                                 ? bf16_to_f32(f32_to_bf16(x[r * in + i]))
                                 : x[r * in + i];
            exact += double(w) * xv;
            magnitude += std::fabs(double(w) * xv);
          }
          ASSERT_NEAR(y[r * out + o], exact, 8.0 * in * 0x1p-24 * magnitude + 1e-30)
              << "rows " << rows << " type " << static_cast<int>(type) << " output " << o;
        }
      (type == ElementType::kF32 ? dwf.a : dwb.a) = std::move(*m.storage);  // give the buffer back
    }
  }
}

// Embedding rows from a bf16 table, and request states gathered into rows and scattered back.
TEST(GpuModelKernels, EmbeddingAndStateRows) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t vocab = 50, hidden = 96;
  const auto table = normal(vocab * hidden, 9);
  std::vector<uint16_t> table_bf16(table.size());
  for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = f32_to_bf16(table[i]);
  const std::vector<int32_t> tokens = {3, 49, 0, 3};
  Dev<uint16_t> dt(table_bf16);
  Dev<int32_t> dtok(tokens);
  Dev<float> dout(tokens.size() * hidden), states(8 * hidden), back(tokens.size() * hidden);
  ASSERT_TRUE(embed_rows(dt.p(), ElementType::kBF16, hidden, dtok.p(), 4, dout.p(), nullptr).ok());
  const auto e = dout.read(tokens.size() * hidden);
  for (size_t r = 0; r < tokens.size(); ++r)
    for (int64_t i = 0; i < hidden; ++i)
      ASSERT_EQ(e[r * hidden + i], bf16_to_f32(table_bf16[tokens[r] * hidden + i]));
  const std::vector<int32_t> slots = {6, 1, 7, 0};
  Dev<int32_t> dslots(slots);
  ASSERT_TRUE(scatter_rows(dout.p(), dslots.p(), 4, hidden, states.p(), nullptr).ok());
  ASSERT_TRUE(gather_rows(states.p(), dslots.p(), 4, hidden, back.p(), nullptr).ok());
  EXPECT_EQ(back.read(tokens.size() * hidden), e);
}

}  // namespace
}  // namespace rlt::cuda

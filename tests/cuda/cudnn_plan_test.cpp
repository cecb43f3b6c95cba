// cuDNN itself, asked without a GPU: do the graphs the cudnn backend builds pass the frontend's
// checks, and does cuDNN have execution plans for them on an H200 (sm_90) and an A100 (sm_80), at
// the shapes the engine sends? Deviceless
// planning reads a description of the card (tests/cuda/data/*.cudnn-device.json) and compiles
// cuDNN's runtime kernels up to loading them, for which libcuda.so.1 must load: where no driver
// is installed, the toolkit's stub library stands in (loaded first, by path, so the loader hands
// it to cuDNN). Its own executable, so the stub never reaches a test that asks for a real device.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attention/cudnn_library.h"
#include "attention/cudnn_shape.h"

namespace rlt::attention {
namespace {

std::string read_device(const char* name) {
  std::ifstream in(std::string(RLT_SOURCE_DIR) + "/tests/cuda/data/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The toolkit's stub libcuda, loaded by path before anything asks for libcuda.so.1 (its soname):
// cuDNN then gets the stub even where a driver is installed, so the check is the same everywhere.
// A driver when the stub is missing; the reason when neither loads.
std::string load_libcuda() {
  if (::dlopen(RLT_CUDA_STUB_LIBCUDA, RTLD_NOW | RTLD_GLOBAL) != nullptr) return "";
  if (::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) != nullptr) return "";
  return std::string("neither the stub ") + RLT_CUDA_STUB_LIBCUDA + " nor libcuda.so.1 loads";
}

// Deviceless planning reads the device description through cuDNN 9.8+.
std::string cannot_plan() {
  const auto loaded = cudnn_library::load();
  if (!loaded.ok()) return loaded.status().to_string();
  if (*loaded < 90800) return "deviceless planning needs cuDNN 9.8 or newer";
  return "";
}

struct Call {
  const char* what;
  int32_t seqs, rows_per_seq, table_width, block_size, q_heads, kv_heads, head_dim;
  DType dtype;
};

// The engine's calls: Ouro-1.4B's attention (16/16 heads of 128) at decode batches 1/32/128 over
// 1K and 4K contexts and a 1,024-token prefill; GQA, f16, pages of 1 and 256 tokens, head_dim 64,
// 80 and 8 (the declared range's edges);
// NHD pools whose blocks span 24 layers of K and V.
const Call kCalls[] = {
    {"decode b1 ctx1K", 1, 1, 64, 16, 16, 16, 128, DType::kBF16},
    {"decode b32 ctx1K", 32, 1, 64, 16, 16, 16, 128, DType::kBF16},
    {"decode b128 ctx4K", 128, 1, 256, 16, 16, 16, 128, DType::kBF16},
    {"prefill 1x1024", 1, 1024, 64, 16, 16, 16, 128, DType::kBF16},
    {"prefill chunks 4x256 GQA 4", 4, 256, 64, 16, 32, 8, 128, DType::kBF16},
    {"decode f16 head_dim 64, pages of 1", 8, 1, 512, 1, 8, 2, 64, DType::kF16},
    {"decode pages of 256", 8, 1, 4, 256, 16, 16, 128, DType::kBF16},
    {"prefill head_dim 80 GQA 2", 3, 40, 8, 16, 8, 4, 80, DType::kBF16},
    {"decode head_dim 8", 2, 1, 8, 16, 4, 4, 8, DType::kF16},
};

CudnnShape shape_of(const Call& c) {
  AttentionParams p;
  std::vector<int32_t> cu(static_cast<size_t>(c.seqs) + 1);
  for (int32_t s = 0; s <= c.seqs; ++s) cu[static_cast<size_t>(s)] = s * c.rows_per_seq;
  p.rows = int64_t{c.seqs} * c.rows_per_seq;
  p.num_seqs = c.seqs;
  p.cu_seqlens_q = c.rows_per_seq > 1 ? cu.data() : nullptr;
  p.max_seqlen_q = c.rows_per_seq;
  p.num_q_heads = c.q_heads;
  p.table_width = c.table_width;
  for (auto* v : {&p.k, &p.v}) {
    v->num_blocks = 8192;
    v->block_size = c.block_size;
    v->num_kv_heads = c.kv_heads;
    v->head_dim = c.head_dim;
    v->dtype = c.dtype;
    v->head_stride = c.head_dim;
    v->token_stride = int64_t{c.kv_heads} * c.head_dim;
    v->block_stride = int64_t{24} * 2 * c.block_size * v->token_stride;
  }
  auto shape = cudnn_shape_of(p);
  EXPECT_TRUE(shape.ok()) << c.what << ": " << shape.status().to_string();
  return shape.ok() ? *shape : CudnnShape{};
}

// The frontend's own checks of each graph (dims, strides, the paged table's width, mask support
// for the loaded cuDNN) on every architecture the backend is declared for; needs no libcuda.
TEST(CudnnPlans, TheGraphsPassTheFrontendsChecks) {
  const auto loaded = cudnn_library::load();
  if (!loaded.ok()) GTEST_SKIP() << loaded.status().to_string();
  for (const Call& c : kCalls) {
    for (int32_t sm : {80, 90, 100}) {
      const Status s = validate_cudnn_graph(shape_of(c), sm);
      EXPECT_TRUE(s.ok()) << c.what << " on sm_" << sm << ": " << s.to_string();
    }
  }
  // The checks are live: a head_dim cuDNN cannot run (cudnn_shape_of would refuse it first) fails.
  CudnnShape bad = shape_of(kCalls[0]);
  bad.head_dim = 12;
  bad.k_head_stride = bad.v_head_stride = 12;
  bad.k_token_stride = bad.v_token_stride = 16 * 12;
  const Status rejected = validate_cudnn_graph(bad, 90);
  EXPECT_FALSE(rejected.ok());
  EXPECT_NE(rejected.message().find("cuDNN rejects"), std::string::npos) << rejected.to_string();
}

// The planning step is real: before any libcuda is loaded (the tests run in this order, in this
// executable of their own), cuDNN cannot compile its runtime kernels and lists no plan for the
// same graph. Skipped where cuDNN finds a driver by itself.
TEST(CudnnPlans, WithoutLibcudaCudnnListsNoPlan) {
  if (const std::string why = cannot_plan(); !why.empty()) GTEST_SKIP() << why;
  const auto count =
      count_cudnn_plans(shape_of(kCalls[1]), read_device("h200.cudnn-device.json"), 90);
  ASSERT_TRUE(count.ok()) << count.status().to_string();
  if (count->automatic > 0)
    GTEST_SKIP() << "cuDNN loaded a CUDA driver by itself: the control needs none";
  EXPECT_EQ(count->composite, 0);
  EXPECT_NE(count->automatic_error.find("No valid engine configs"), std::string::npos)
      << count->automatic_error;
}

TEST(CudnnPlans, CudnnHasPlansForEveryCallOnH200AndA100) {
  if (const std::string why = cannot_plan(); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = load_libcuda(); !why.empty()) GTEST_SKIP() << why;
  const struct {
    const char* file;
    int32_t sm;
  } devices[] = {{"h200.cudnn-device.json", 90}, {"a100.cudnn-device.json", 80}};
  for (const auto& device : devices) {
    const std::string json = read_device(device.file);
    ASSERT_FALSE(json.empty()) << device.file;
    for (const Call& c : kCalls) {
      const auto count = count_cudnn_plans(shape_of(c), json, device.sm);
      ASSERT_TRUE(count.ok()) << count.status().to_string();
      // The engine the frontend picks must have a plan; the composite one the backend falls back
      // to, too.
      EXPECT_GT(count->automatic, 0)
          << device.file << " " << c.what << ": " << count->automatic_error;
      EXPECT_GT(count->composite, 0)
          << device.file << " " << c.what << ": " << count->composite_error;
    }
  }
}

// Pages of 3 tokens (which cudnn_shape_of refuses) get no plan: cuDNN refuses them while building
// the operation graph.
TEST(CudnnPlans, APageSizeCudnnCannotLoadHasNoPlan) {
  if (const std::string why = cannot_plan(); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = load_libcuda(); !why.empty()) GTEST_SKIP() << why;
  CudnnShape s = shape_of(kCalls[1]);
  s.block_size = 3;
  s.k_block_stride = s.v_block_stride = int64_t{24} * 2 * 3 * s.k_token_stride;
  const auto count = count_cudnn_plans(s, read_device("h200.cudnn-device.json"), 90);
  ASSERT_TRUE(count.ok()) << count.status().to_string();
  EXPECT_EQ(count->automatic, 0);
  EXPECT_EQ(count->composite, 0);
  EXPECT_NE(count->composite_error.find("power of 2"), std::string::npos) << count->composite_error;
}

}  // namespace
}  // namespace rlt::attention

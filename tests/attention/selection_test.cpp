// Table-driven selection over simulated devices, builds and libraries.
#include "attention/selection.h"

#include <gtest/gtest.h>

namespace rlt::attention {
namespace {

// A build with CUDA compiled in and cuDNN loadable unless a test says otherwise.
SelectionInput cuda_input(int sm, DType dtype = DType::kBF16, int32_t head_dim = 128, int32_t page = 16) {
  SelectionInput in;
  in.device = *parse_device("cuda:sm_" + std::to_string(sm));
  in.kv_dtype = dtype;
  in.head_dim = head_dim;
  in.page_size = page;
  in.num_q_heads = 16;
  in.num_kv_heads = 16;
  in.is_built = [](const BackendEntry&) { return true; };
  in.library_loads = [](const std::string&) { return true; };
  return in;
}

SelectionInput cpu_input(const std::string& device, DType dtype = DType::kBF16) {
  SelectionInput in;
  in.device = *parse_device(device);
  in.kv_dtype = dtype;
  in.head_dim = 128;
  in.page_size = 16;
  in.num_q_heads = 16;
  in.num_kv_heads = 16;
  return in;
}

const CandidateVerdict& verdict(const SelectionReport& r, const std::string& name) {
  for (const auto& c : r.candidates)
    if (c.backend == name) return c;
  throw std::runtime_error("no candidate " + name);
}

struct AutoCase {
  const char* label;
  SelectionInput input;
  const char* expected;
};

TEST(AttentionSelection, AutoFollowsThePreferenceOrder) {
  auto no_cudnn = cuda_input(89);
  no_cudnn.library_loads = [](const std::string&) { return false; };
  auto graphs_cpu = cpu_input("cpu:avx2");
  auto page_300 = cuda_input(90, DType::kBF16, 128, 300);
  auto f32_hopper = cuda_input(90, DType::kF32);
  auto hd_96 = cuda_input(90, DType::kBF16, 96);
  auto fp16_sm89_hd256 = cuda_input(89, DType::kF16, 256);
  const AutoCase cases[] = {
      {"sm_90 bf16 hd128 page16", cuda_input(90), "cuda_hopper"},
      {"sm_89 bf16", cuda_input(89), "cuda_paged"},
      {"sm_80 f16", cuda_input(80, DType::kF16), "cuda_paged"},
      {"sm_100 bf16 (hopper kernel is sm_90a only)", cuda_input(100), "cuda_paged"},
      {"sm_90 f32 (hopper needs 16-bit)", f32_hopper, "cuda_paged"},
      {"sm_90 head_dim 96 (hopper: 64/128/256)", hd_96, "cuda_paged"},
      {"sm_89 f16 head_dim 256 without cudnn", fp16_sm89_hd256, "cuda_paged"},
      {"sm_90 page 300 (too large for every CUDA kernel)", page_300, ""},
      {"cpu avx512", cpu_input("cpu:avx512"), "cpu_flash"},
      {"cpu avx2", cpu_input("cpu:avx2"), "cpu_flash"},
      {"cpu neon", cpu_input("cpu:neon"), "cpu_flash"},
      {"cpu scalar", cpu_input("cpu:scalar"), "cpu_reference"},
  };
  (void)no_cudnn;
  (void)graphs_cpu;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto r = select_attention_backend(c.input);
    EXPECT_EQ(r.selected, c.expected) << r.to_text();
    EXPECT_EQ(r.status.ok(), std::string(c.expected) != "") << r.status.to_string();
    EXPECT_EQ(r.candidates.size(), backend_registry().size()) << "every candidate gets a verdict";
  }
}

TEST(AttentionSelection, EveryReasonCodeIsReported) {
  {
    auto r = select_attention_backend(cuda_input(89));
    EXPECT_EQ(verdict(r, "cuda_hopper").code, reason::kComputeCapability);
    EXPECT_NE(verdict(r, "cuda_hopper").message.find("needs compute capability sm_90 exactly, the device is sm_89"), std::string::npos);
    EXPECT_EQ(verdict(r, "cuda_paged").code, reason::kSelected);
    EXPECT_EQ(verdict(r, "cudnn").code, reason::kLowerPreference);
    EXPECT_EQ(verdict(r, "cpu_flash").code, reason::kDeviceKind);
  }
  {
    auto r = select_attention_backend(cuda_input(90, DType::kF32));
    EXPECT_EQ(verdict(r, "cuda_hopper").code, reason::kKvDtype);
    EXPECT_EQ(verdict(r, "cudnn").code, reason::kKvDtype);
  }
  {  // a Q8_0 cache: the CPU backends only; on a GPU no backend, each saying what to choose
    auto r = select_attention_backend(cuda_input(90, DType::kQ8_0));
    EXPECT_FALSE(r.status.ok());
    EXPECT_EQ(verdict(r, "cuda_paged").code, reason::kKvDtype);
    EXPECT_NE(
        verdict(r, "cuda_paged").message.find("not Q8_0; choose one of those with --kv-dtype"),
        std::string::npos);
    EXPECT_EQ(select_attention_backend(cpu_input("cpu:avx512", DType::kQ8_0)).selected,
              "cpu_flash");
    EXPECT_EQ(select_attention_backend(cpu_input("cpu:scalar", DType::kQ8_0)).selected,
              "cpu_reference");
  }
  {
    auto r = select_attention_backend(cuda_input(90, DType::kBF16, 96));
    EXPECT_EQ(verdict(r, "cuda_hopper").code, reason::kHeadDim);
    EXPECT_NE(verdict(r, "cuda_hopper").message.find("one of 64, 128, 256"), std::string::npos);
  }
  {
    auto r = select_attention_backend(cuda_input(90, DType::kBF16, 128, 8));
    EXPECT_EQ(verdict(r, "cuda_hopper").code, reason::kPageSize);
    EXPECT_NE(verdict(r, "cuda_hopper").message.find("use --block-size 16"), std::string::npos);
  }
  {
    auto in = cuda_input(90);
    in.num_q_heads = 64;
    in.num_kv_heads = 2;  // ratio 32 > hopper's 16
    auto r = select_attention_backend(in);
    EXPECT_EQ(verdict(r, "cuda_hopper").code, reason::kGqaRatio);
    EXPECT_EQ(r.selected, "cuda_paged");
  }
  {
    auto in = cuda_input(90);
    in.is_built = [](const BackendEntry& e) { return e.caps.device == DeviceKind::kCpu; };  // a CPU-only build
    auto r = select_attention_backend(in);
    EXPECT_EQ(verdict(r, "cuda_paged").code, reason::kNotBuilt);
    EXPECT_NE(verdict(r, "cuda_paged").message.find("-DRLT_CUDA=ON"), std::string::npos);
    EXPECT_FALSE(r.status.ok());
  }
  {
    auto in = cuda_input(89, DType::kF16, 64);
    in.library_loads = [](const std::string&) { return false; };
    in.requested = "cudnn";
    auto r = select_attention_backend(in);
    EXPECT_EQ(verdict(r, "cudnn").code, reason::kLibraryUnavailable);
    EXPECT_NE(r.status.message().find("libcudnn.so.9"), std::string::npos);
  }
  {
    auto in = cpu_input("cpu:scalar");
    auto r = select_attention_backend(in);
    EXPECT_EQ(verdict(r, "cpu_flash").code, reason::kCpuIsa);
  }
  {
    auto in = cuda_input(90);
    in.requirements.deterministic = true;
    in.requested = "cudnn";
    auto r = select_attention_backend(in);
    EXPECT_EQ(verdict(r, "cudnn").code, "missing_capability:deterministic");
  }
}

TEST(AttentionSelection, RequirementFilterFailsStartupNamingEveryCandidate) {
  auto in = cpu_input("cpu:avx2");
  in.requirements.cuda_graphs = true;
  auto r = select_attention_backend(in);
  ASSERT_FALSE(r.status.ok());
  EXPECT_TRUE(r.selected.empty());
  const std::string& m = r.status.message();
  EXPECT_NE(m.find("no attention backend fits this run on cpu:avx2"), std::string::npos) << m;
  for (const auto& e : backend_registry()) EXPECT_NE(m.find(e.name), std::string::npos) << e.name;
  EXPECT_EQ(verdict(r, "cpu_flash").code, "missing_capability:cuda_graphs");
  EXPECT_EQ(verdict(r, "cpu_reference").code, "missing_capability:cuda_graphs");
  // The same requirement on a GPU keeps only graph-safe backends.
  auto gpu = cuda_input(89);
  gpu.requirements.cuda_graphs = gpu.requirements.async_scheduling = gpu.requirements.packed_prefill = true;
  EXPECT_EQ(select_attention_backend(gpu).selected, "cuda_paged");
}

TEST(AttentionSelection, ExplicitChoicesNeverFallBack) {
  auto in = cuda_input(89);
  in.requested = "cuda_hopper";
  auto r = select_attention_backend(in);
  EXPECT_TRUE(r.selected.empty());
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("'cuda_hopper' was requested but cannot run here"), std::string::npos);
  EXPECT_NE(r.status.message().find("no fallback; compatible here: cuda_paged, cudnn"), std::string::npos) << r.status.message();
  EXPECT_EQ(verdict(r, "cuda_paged").code, reason::kNotRequested);

  auto cpu = cpu_input("cpu:avx2");
  cpu.requested = "cuda_paged";
  auto c = select_attention_backend(cpu);
  EXPECT_FALSE(c.status.ok());
  EXPECT_NE(c.status.message().find("runs on a CUDA GPU, but the device is cpu:avx2"), std::string::npos);

  cpu.requested = "cpu_reference";
  auto ok = select_attention_backend(cpu);
  EXPECT_TRUE(ok.status.ok());
  EXPECT_EQ(ok.selected, "cpu_reference");
  EXPECT_NE(ok.reason.find("explicitly requested"), std::string::npos);
  EXPECT_EQ(verdict(ok, "cpu_flash").code, reason::kNotRequested);

  cpu.requested = "flash_attn_9";
  auto unknown = select_attention_backend(cpu);
  EXPECT_NE(unknown.status.message().find("unknown attention backend 'flash_attn_9'; choose one of: auto, cuda_hopper"),
            std::string::npos);
}

TEST(AttentionSelection, ReportRendersAsTextAndJson) {
  auto r = select_attention_backend(cpu_input("cpu:avx2"));
  const std::string text = r.to_text();
  EXPECT_NE(text.find("attention backend: cpu_flash (requested auto, device cpu:avx2)"), std::string::npos) << text;
  const std::string json = r.to_json();
  EXPECT_NE(json.find("\"selected\": \"cpu_flash\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"code\": \"device_kind\""), std::string::npos);
}

TEST(AttentionSelection, ParsesDevices) {
  EXPECT_EQ(parse_device("cuda:sm_90a")->sm, 90);
  EXPECT_EQ(parse_device("cpu:avx512")->isa, CpuIsa::kAvx512);
  EXPECT_FALSE(parse_device("tpu").ok());
  EXPECT_NE(parse_device("cpu:avx9").status().message().find("unknown CPU level"), std::string::npos);
  EXPECT_EQ(detect_host_cpu().kind, DeviceKind::kCpu);
}

TEST(AttentionSelection, UnbuiltCudaBackendsAreReportedAsNotBuilt) {
  SelectionInput in = cpu_input("cpu");
  in.device.kind = DeviceKind::kCuda;  // pretend a GPU exists; the build decides what is compiled
  in.device.sm = 90;
  auto r = select_attention_backend(in);
  for (const char* name : {"cuda_hopper", "cuda_paged", "cudnn"}) {
    EXPECT_EQ(verdict(r, name).code == reason::kNotBuilt, !find_backend(name)->built) << name;
  }
#ifdef RLT_TEST_BUILD_HAS_CUDA
  EXPECT_TRUE(find_backend("cuda_paged")->built) << "a CUDA build registers the paged kernels";
#else
  EXPECT_FALSE(find_backend("cuda_paged")->built);
#endif
}

}  // namespace
}  // namespace rlt::attention

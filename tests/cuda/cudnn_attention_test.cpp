// The cudnn backend: its library probe (no device needed), then cuDNN's fused attention against
// cpu_reference on the shared equivalence suite through the device adapter, and the graph-replay
// rule it declares. The GPU cases skip without a device, and say so when cuDNN does not load.
#include <gtest/gtest.h>

#include "attention/cudnn_library.h"
#include "attention/cudnn_shape.h"
#include "attention/registry.h"
#include "attention/selection.h"
#include "device_adapter.h"
#include "equivalence_suite.h"
#include "gpu_test_util.h"
#include "graph_replay_check.h"

namespace rlt::attention {
namespace {

// cuDNN rounds what the contract keeps in f32: Q as it is staged in the K/V type, the softmax
// probabilities before the P V product, and the output it writes in the K/V type.
// tools/tensor_core_prefill_error.py --backend cudnn replays exactly those roundings on this
// suite's data (N(0, 1) values, decode rows and causal packed rows, head_dim 64/80/128, contexts
// up to 1,100): the largest error over 240 cases is 8.7e-3 for bf16 and 9e-4 for f16, so 2.5e-2
// and 3e-3 leave a ~3x margin. A mask or page mistake of a single key can move an output by less
// than that at long contexts, which is what CausalAndContextBoundaries is for: there any such
// mistake moves an output by about 2.
constexpr float kCudnnTolerance = 2.5e-2f;
constexpr float kCudnnF16Tolerance = 3e-3f;
const testing::LowPrecisionPrefill kCudnnRounding{
    {8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128},
    kCudnnTolerance,
    /*single_query_rows=*/true,
    kCudnnF16Tolerance};

#define RLT_REQUIRE_CUDNN()                                          \
  do {                                                               \
    RLT_REQUIRE_CUDA_DEVICE();                                       \
    const auto loaded_ = cudnn_library::load();                      \
    if (!loaded_.ok()) GTEST_SKIP() << loaded_.status().to_string(); \
  } while (0)

std::unique_ptr<AttentionBackend> adapted() {
  return std::make_unique<testing::DeviceAdapter>(find_backend("cudnn")->create());
}

TEST(Cudnn, IsRegisteredAsBuiltWithItsLibraryCheck) {
  const BackendEntry* entry = find_backend("cudnn");
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->built);
  EXPECT_NE(entry->library_check, nullptr);
  EXPECT_TRUE(entry->create()->reads_device_memory());
}

TEST(Cudnn, AMissingLibraryIsExplainedWithAFix) {
  const auto probed = cudnn_library::probe("libcudnn-not-installed.so.9");
  ASSERT_FALSE(probed.ok());
  const std::string& m = probed.status().message();
  EXPECT_NE(m.find("libcudnn-not-installed.so.9"), std::string::npos) << m;
  EXPECT_NE(m.find("LD_LIBRARY_PATH"), std::string::npos) << m;
  EXPECT_NE(m.find("--attention-backend auto"), std::string::npos) << m;
}

// Where cuDNN is installed (the CUDA toolkit here ships it), the probe reads its version without a
// device, and selection reports the same verdict.
TEST(Cudnn, TheInstalledLibraryReportsItsVersion) {
  if (!shared_library_loads(cudnn_library::kLibraryName))
    GTEST_SKIP() << "libcudnn.so.9 is not installed here";
  const auto probed = cudnn_library::probe(cudnn_library::kLibraryName);
  if (!probed.ok()) {
    EXPECT_NE(probed.status().message().find("needs 9.6"), std::string::npos)
        << probed.status().to_string();
    return;
  }
  EXPECT_GE(*probed, cudnn_library::kMinimumVersion);
  EXPECT_TRUE(find_backend("cudnn")->library_check().ok());
}

TEST(Cudnn, MatchesCpuReferenceOnRandomPagedBatches) {
  RLT_REQUIRE_CUDNN();
  auto backend = adapted();
  testing::check_random_batches(find_backend("cudnn")->caps, *backend, kCudnnRounding,
                                /*min_cases=*/15);
}

TEST(Cudnn, CausalAndContextBoundaries) {
  RLT_REQUIRE_CUDNN();
  auto backend = adapted();
  for (DType dtype : {DType::kBF16, DType::kF16})
    testing::check_causal_boundaries(*backend, dtype, 1e-2f);
}

TEST(Cudnn, LongRows) {
  RLT_REQUIRE_CUDNN();
  auto backend = adapted();
  testing::check_long_rows(*backend, kCudnnTolerance);
}

// Packed sequences of up to 100 query rows next to single rows: padding to the longest sequence,
// bottom-right causal alignment per sequence, GQA, both 16-bit types, pages of 1 and 16 tokens.
TEST(Cudnn, LongPackedSequences) {
  RLT_REQUIRE_CUDNN();
  auto backend = adapted();
  for (int i = 0; i < 4; ++i) {
    // head_dim, GQA ratio over 2 KV heads, page size, contexts up to 700, 4 packed sequences of
    // 1..100 rows.
    const testing::Case c{i % 2 ? 128 : 64,
                          i < 2 ? 4 : 1,
                          2,
                          i == 1 ? 1 : 16,
                          700,
                          4,
                          i % 2 ? DType::kF16 : DType::kBF16,
                          true,
                          -1,
                          100};
    EXPECT_LE(testing::run_case(c, 600 + static_cast<uint32_t>(i), *backend),
              kCudnnRounding.for_case(c))
        << "case " << i;
  }
}

// A packed call whose padded staging exceeds the backend's limit runs as several cuDNN calls over
// runs of consecutive sequences (absolute row offsets, offset metadata): with a limit of 192 KiB
// (one sequence of up to 64 rows fits, two such do not) random mixes of short and long sequences
// split into several ranges and still match the reference.
TEST(Cudnn, OversizedPackedCallsRunAsSequenceRanges) {
  RLT_REQUIRE_CUDNN();
  constexpr int64_t kLimit = int64_t{192} << 10;
  testing::DeviceAdapter backend(make_cudnn_backend_with_staging_limit(kLimit));
  int split = 0;
  for (int i = 0; i < 4; ++i) {
    // head_dim 64, GQA 4 over 2 KV heads, 16-token pages, contexts up to 300, 8 packed sequences
    // of 1..60 rows.
    const testing::Case c{64, 4, 2, 16, 300, 8, i % 2 ? DType::kF16 : DType::kBF16, true, -1, 60};
    size_t ranges = 0;
    const float err = testing::run_case(
        c, 700 + static_cast<uint32_t>(i), backend, [&](const AttentionParams& p) {
          const auto r = cudnn_sequence_ranges(p, p.cu_seqlens_q, kLimit);
          ranges = r.ok() ? r->size() : 0;
        });
    EXPECT_LE(err, kCudnnRounding.for_case(c)) << "case " << i << ", " << ranges << " ranges";
    split += ranges > 1;
  }
  EXPECT_GE(split, 3) << "too few cases needed several ranges to mean anything";
}

TEST(Cudnn, PackedPrefillEqualsPerRowDecode) {
  RLT_REQUIRE_CUDNN();
  auto backend = adapted();
  testing::check_packed_equals_per_row(*backend, kCudnnTolerance);
}

TEST(Cudnn, GraphReplayReadsLengthsAndTablesFromDevice) {
  RLT_REQUIRE_CUDNN();
  auto backend = find_backend("cudnn")->create();
  testing::check_graph_replay_reads_device_metadata(*backend);
}

}  // namespace
}  // namespace rlt::attention

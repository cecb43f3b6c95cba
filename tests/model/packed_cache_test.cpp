// The packed-weight cache: a model mapped from it is bit-identical to one packed at load (the
// packed bytes and the logits), for float, --quantize and int8-activation layouts; a corrupted,
// truncated, foreign or stale cache file is detected, reported and rebuilt; a cache that cannot be
// written costs nothing but the note; deferred packing ends with the same bytes and cache.
// Also: a model that cannot fit in memory is refused before loading, with the numbers.
#include "model/packed_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/linear_quant_int8.h"
#include "model/deferred_packing.h"
#include "model/demo_checkpoint.h"
#include "model/ouro_weights.h"
#include "model/reference_model.h"

namespace rlt::model {
namespace {

namespace fs = std::filesystem;

// A two-layer model of hidden size 256 whose MLP is `intermediate` wide.
RandomCheckpointShape small_shape(int64_t intermediate) {
  RandomCheckpointShape s{.vocab = 300,
                          .hidden = 256,
                          .intermediate = intermediate,
                          .layers = 2,
                          .heads = 4,
                          .kv_heads = 2,
                          .head_dim = 64,
                          .loops = 2,
                          .max_positions = 128};
  s.projection = s.head = std::sqrt(3.0 / 256.0);
  return s;
}

class PackedCache : public ::testing::Test {
 public:  // expect_rebuilt drives a fixture
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rlt_packed_cache_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    model_ = (root_ / "model").string();
    cache_ = (root_ / "cache").string();
    ASSERT_TRUE(write_random_checkpoint(model_, small_shape(512), 11).ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  std::shared_ptr<const OuroModel> load(LoadOptions options) {
    auto m = load_ouro_model(model_, options);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? *m : nullptr;
  }
  LoadOptions cached(LoadOptions o = {}) {
    o.packed_cache_dir = cache_;
    return o;
  }
  // The one cache file of the folder.
  std::string cache_file() const {
    for (const auto& e : fs::directory_iterator(cache_))
      if (e.path().extension() == ".rltpack") return e.path().string();
    return "";
  }

  fs::path root_;
  std::string model_, cache_;
};

std::vector<const kernels::PackedMatrix*> matrices(const OuroModel& m) {
  std::vector<const kernels::PackedMatrix*> out = {&m.weights.lm_head};
  for (const auto& l : m.weights.layers)
    for (const auto* p : {&l.qkv, &l.o_proj, &l.gate_up, &l.down_proj}) out.push_back(p);
  return out;
}

void expect_same_packing(const OuroModel& a, const OuroModel& b) {
  const auto ma = matrices(a), mb = matrices(b);
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(ma[i]->bytes(), mb[i]->bytes());
    EXPECT_EQ(ma[i]->layout(), mb[i]->layout());
    EXPECT_EQ(ma[i]->outputs(), mb[i]->outputs());
    EXPECT_EQ(ma[i]->quant_panels().size(), mb[i]->quant_panels().size());
    EXPECT_EQ(std::memcmp(ma[i]->data(), mb[i]->data(), static_cast<size_t>(ma[i]->bytes())), 0);
  }
}

std::vector<float> logits(std::shared_ptr<const OuroModel> m) {
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79};
  auto r = ReferenceModel(std::move(m)).prefill(prompt);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->logits : std::vector<float>{};
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST_F(PackedCache, MappedWeightsAreBitIdenticalToPackedOnes) {
  std::vector<std::pair<std::string, LoadOptions>> cases = {{"bf16", {}}};
  LoadOptions q4k;
  q4k.quantize = QuantizeType::kQ4_K;
  cases.push_back({"q4_k", q4k});
  if (kernels::linear_quant_int8_supported()) {
    LoadOptions int8 = q4k;
    int8.int8_activations = true;
    cases.push_back({"q4_k int8", int8});
  }
  for (const auto& [label, options] : cases) {
    SCOPED_TRACE(label);
    fs::remove_all(cache_);
    auto plain = load(options);
    auto written = load(cached(options));
    auto hit = load(cached(options));
    ASSERT_TRUE(plain && written && hit);
    EXPECT_EQ(plain->load_report.cache, "off");
    EXPECT_EQ(written->load_report.cache, "written") << written->load_report.cache_note;
    EXPECT_EQ(hit->load_report.cache, "hit") << hit->load_report.cache_note;
    EXPECT_EQ(hit->load_report.pack_seconds, 0.0);
    expect_same_packing(*plain, *hit);
    if (options.quantize != QuantizeType::kNone) {
      // A hit never quantizes: the matrices' conversions were deferred and never ran.
      const io::TensorView* down = hit->checkpoint.find("model.layers.0.mlp.down_proj.weight");
      EXPECT_EQ(down->data, nullptr);
      EXPECT_TRUE(static_cast<bool>(down->convert));
      // Packing at load converted and then freed them, one layer at a time.
      const io::TensorView* packed = plain->checkpoint.find("model.layers.0.mlp.down_proj.weight");
      EXPECT_EQ(packed->data, nullptr);
      EXPECT_EQ(packed->owner, nullptr);
    }
    EXPECT_EQ(plain->quantized_types(), hit->quantized_types());
    EXPECT_EQ(plain->core_weight_bytes_per_loop(), hit->core_weight_bytes_per_loop());
    expect_bit_identical(logits(plain), logits(hit));
    expect_bit_identical(logits(plain), logits(written));
  }
}

// A quantized matrix lists every panel in the header: a model of many panels (the Ouro-1.4B
// shape's 2,000-odd per loop) once made a header larger than the room the writer left for it,
// and no cache was ever written.
TEST_F(PackedCache, AQuantizedModelOfManyPanelsIsCached) {
  const std::string wide = (root_ / "wide").string();
  ASSERT_TRUE(write_random_checkpoint(wide, small_shape(16384), 12).ok());
  LoadOptions q8 = cached();
  q8.quantize = QuantizeType::kQ8_0;
  auto written = load_ouro_model(wide, q8);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  EXPECT_EQ((*written)->load_report.cache, "written") << (*written)->load_report.cache_note;
  auto hit = load_ouro_model(wide, q8);
  ASSERT_TRUE(hit.ok()) << hit.status().to_string();
  EXPECT_EQ((*hit)->load_report.cache, "hit") << (*hit)->load_report.cache_note;
  expect_same_packing(**written, **hit);
}

TEST_F(PackedCache, ABackgroundWriteLeavesAUsableCache) {
  LoadOptions o = cached();
  o.write_cache_in_background = true;
  auto first = load(o);
  ASSERT_TRUE(first && first->cache_write);
  EXPECT_EQ(first->load_report.cache, "writing");
  EXPECT_TRUE(first->cache_write->wait().ok());
  auto second = load(o);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->load_report.cache, "hit") << second->load_report.cache_note;
  EXPECT_EQ(second->cache_write, nullptr);
  expect_bit_identical(logits(first), logits(second));
}

// Deferred packing: the model answers at once from the checkpoint's rows with the packed kernels'
// results bit for bit, step by step ends with the bytes packing at load gives, and writes the
// cache a later start maps.
TEST_F(PackedCache, DeferredPackingComputesTheSameAndWritesTheSameCache) {
  auto plain = load({});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->load_report.packing_deferred);
  EXPECT_EQ(plain->deferred_packing, nullptr);
  LoadOptions o = cached();
  o.write_cache_in_background = true;
  o.defer_packing = true;
  auto first = load(o);
  ASSERT_TRUE(first && first->deferred_packing);
  EXPECT_TRUE(first->load_report.packing_deferred);
  EXPECT_EQ(first->load_report.cache, "writing");
  EXPECT_NE(first->load_report.summary().find("packed between steps"), std::string::npos);
  for (const kernels::PackedMatrix* m : matrices(*first)) EXPECT_NE(m->pending_rows(), nullptr);
  const std::vector<float> expected = logits(plain);
  expect_bit_identical(expected, logits(first));
  DeferredPacking& packing = *first->deferred_packing;
  size_t steps = 0;
  while (packing.pending()) {  // a step at a time, every state in between computing the same
    packing.pack_next();
    ++steps;
    expect_bit_identical(expected, logits(first));
  }
  EXPECT_EQ(steps, 1 + first->weights.layers.size());
  ASSERT_TRUE(packing.finish().ok());
  for (const kernels::PackedMatrix* m : matrices(*first)) EXPECT_EQ(m->pending_rows(), nullptr);
  expect_same_packing(*plain, *first);
  auto second = load(o);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->load_report.cache, "hit") << second->load_report.cache_note;
  EXPECT_EQ(second->deferred_packing, nullptr);
  EXPECT_FALSE(second->load_report.packing_deferred);
  expect_same_packing(*plain, *second);
}

TEST_F(PackedCache, DeferredPackingLeavesACacheEvenWhenNothingWasPackedYet) {
  LoadOptions o = cached();
  o.write_cache_in_background = true;
  o.defer_packing = true;
  ASSERT_TRUE(load(o));  // released at once: the rest is packed and the cache written then
  auto second = load(o);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->load_report.cache, "hit") << second->load_report.cache_note;
}

TEST_F(PackedCache, DeferredPackingAppliesOnlyToRowsPackedAsStored) {
  LoadOptions o;
  o.defer_packing = true;
  auto deferred = load(o);
  ASSERT_TRUE(deferred && deferred->deferred_packing);  // released unpacked: nothing dangles
  // What packing converts is packed at load: --quantize, bf16 activations (their own layout).
  LoadOptions q8 = o;
  q8.quantize = QuantizeType::kQ8_0;
  auto quantized = load(q8);
  ASSERT_TRUE(quantized);
  EXPECT_EQ(quantized->deferred_packing, nullptr);
  EXPECT_FALSE(quantized->load_report.packing_deferred);
  for (const kernels::PackedMatrix* m : matrices(*quantized)) EXPECT_EQ(m->pending_rows(), nullptr);
}

TEST_F(PackedCache, OptionsThatChangeThePackingUseAnotherFile) {
  ASSERT_TRUE(load(cached()));
  LoadOptions q8;
  q8.quantize = QuantizeType::kQ8_0;
  auto m = load(cached(q8));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->load_report.cache, "written");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(cache_)) files += e.path().extension() == ".rltpack";
  EXPECT_EQ(files, 2u);
}

// Damages the cache file with `damage`, then checks the next load notices (`why` in its note),
// still computes the right function, and leaves a good cache behind.
void expect_rebuilt(PackedCache* t, const std::string& why,
                    const std::function<void(const std::string&)>& damage) {
  auto reference = t->load({});
  ASSERT_TRUE(t->load(t->cached()));
  damage(t->cache_file());
  auto rebuilt = t->load(t->cached());
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(rebuilt->load_report.cache, "rebuilt");
  EXPECT_NE(rebuilt->load_report.cache_note.find(why), std::string::npos)
      << rebuilt->load_report.cache_note;
  expect_bit_identical(logits(reference), logits(rebuilt));
  auto again = t->load(t->cached());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->load_report.cache, "hit") << again->load_report.cache_note;
  expect_bit_identical(logits(reference), logits(again));
}

void flip_byte(const std::string& path, std::streamoff offset_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-offset_from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  f.seekp(-offset_from_end, std::ios::end);
  c = static_cast<char>(c ^ 0x5a);
  f.write(&c, 1);
}

TEST_F(PackedCache, ACorruptedMatrixIsDetectedAndRebuilt) {
  expect_rebuilt(this, "checksum", [](const std::string& p) {
    flip_byte(p, static_cast<std::streamoff>(fs::file_size(p) / 2));
  });
}

TEST_F(PackedCache, ACorruptedHeaderIsDetectedAndRebuilt) {
  expect_rebuilt(this, "header", [](const std::string& p) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.write("#", 1);
  });
}

TEST_F(PackedCache, ATruncatedFileIsDetectedAndRebuilt) {
  expect_rebuilt(this, "truncated",
                 [](const std::string& p) { fs::resize_file(p, fs::file_size(p) / 2); });
}

TEST_F(PackedCache, AForeignFileIsDetectedAndRebuilt) {
  expect_rebuilt(this, "magic",
                 [](const std::string& p) { std::ofstream(p) << "not a cache at all"; });
}

TEST_F(PackedCache, AChangedCheckpointMakesTheCacheStale) {
  expect_rebuilt(this, "stale", [this](const std::string&) {
    const fs::path weights = fs::path(model_) / "model.safetensors";
    fs::last_write_time(weights, fs::last_write_time(weights) + std::chrono::seconds(5));
  });
}

// Random byte damage anywhere in the prefix and header (the parsed part), and some in the data:
// every load either proves the file intact or rebuilds it, never crashes, never computes
// anything else.
TEST_F(PackedCache, MutatedFilesNeverLoadWrongWeights) {
  const std::vector<float> reference = logits(load({}));
  ASSERT_TRUE(load(cached()));
  const std::string path = cache_file();
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, good.data() + 8, 8);
  uint64_t state = 12345;
  auto next = [&] {
    return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33;
  };
  int rebuilt = 0;
  for (int i = 0; i < 150; ++i) {
    std::string bad = good;
    const uint64_t span = i % 5 == 4 ? bad.size() : 24 + header_bytes;
    for (int k = 0; k < 1 + i % 3; ++k) bad[next() % span] ^= static_cast<char>(1 + next() % 255);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    auto m = load(cached());
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->load_report.cache == "hit" || m->load_report.cache == "rebuilt")
        << m->load_report.cache;
    rebuilt += m->load_report.cache == "rebuilt";
    expect_bit_identical(reference, logits(m));
  }
  EXPECT_GT(rebuilt, 100);  // a damaged header is (almost) always caught by its checksum
}

TEST_F(PackedCache, AnUnwritableCacheCostsOnlyANote) {
  std::ofstream(root_ / "file") << "x";  // a file where the cache folder should be
  LoadOptions o;
  o.packed_cache_dir = (root_ / "file" / "cache").string();
  auto m = load(o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->load_report.cache, "not written");
  EXPECT_FALSE(m->load_report.cache_note.empty());
  expect_bit_identical(logits(load({})), logits(m));
}

TEST(LoadMemoryCheck, AModelThatCannotFitIsRefusedWithTheNumbers) {
  const fs::path dir = fs::temp_directory_path() / ("rlt_fit_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_random_checkpoint(dir.string(), *random_checkpoint_preset("demo"), 3).ok());
  LoadOptions o;
  o.other_bytes = int64_t{1} << 60;  // a KV cache no machine has
  auto m = load_ouro_model(dir.string(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(m.status().message().find("does not fit in memory"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("--kv-cache-gib"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlt::model

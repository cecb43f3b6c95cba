#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "safetensors_test_util.h"

namespace rlt::io {
namespace {

namespace fs = std::filesystem;
using testing::f32_bytes;
using testing::make_file;
using testing::write_file;

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlt_sharded_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_file((dir_ / "model-00001-of-00002.safetensors").string(),
               make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes({1})));
    write_file((dir_ / "model-00002-of-00002.safetensors").string(),
               make_file(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({2, 3})));
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_index(const std::string& text) {
    std::ofstream(dir_ / "model.safetensors.index.json") << text;
  }
  Status open_error() {
    auto r = Checkpoint::open_dir(dir_.string());
    return r.ok() ? Status{} : r.status();
  }

  fs::path dir_;
};

constexpr const char* kGoodIndex =
    R"({"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";

TEST_F(ShardedCheckpoint, LoadsAllShards) {
  write_index(kGoodIndex);
  auto ckpt = Checkpoint::open_dir(dir_.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->tensors().size(), 2u);
  EXPECT_EQ(ckpt->files().size(), 2u);
  EXPECT_EQ(reinterpret_cast<const float*>(ckpt->find("b")->data)[1], 3.0f);
}

TEST_F(ShardedCheckpoint, RejectsInvalidIndexJson) {
  write_index("{\"weight_map\": ");
  EXPECT_NE(open_error().message().find("not valid JSON"), std::string::npos);
}

TEST_F(ShardedCheckpoint, RejectsIndexWithoutWeightMap) {
  write_index(R"({"metadata":{}})");
  EXPECT_NE(open_error().message().find("missing object 'weight_map'"), std::string::npos);
}

TEST_F(ShardedCheckpoint, RejectsMissingShardFile) {
  write_index(R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00003-of-00003.safetensors"}})");
  Status s = open_error();
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_NE(s.message().find("model-00003-of-00003.safetensors"), std::string::npos);
}

TEST_F(ShardedCheckpoint, RejectsTensorMappedToWrongShard) {
  write_index(R"({"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  // Only shard 2 is opened, so 'a' is absent from the files the index names.
  EXPECT_NE(open_error().message().find("tensor 'a' is mapped to 'model-00002-of-00002.safetensors' but that file does not contain it"),
            std::string::npos);
}

TEST_F(ShardedCheckpoint, RejectsTensorMissingFromIndex) {
  write_index(R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
  Status s = open_error();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'c'"), std::string::npos) << s.message();
}

TEST_F(ShardedCheckpoint, RejectsUnlistedTensorInShard) {
  write_index(R"({"weight_map":{"b":"model-00002-of-00002.safetensors","a2":"model-00001-of-00002.safetensors"}})");
  Status s = open_error();
  EXPECT_FALSE(s.ok());
}

TEST_F(ShardedCheckpoint, RejectsTensorDuplicatedAcrossShards) {
  write_file((dir_ / "model-00002-of-00002.safetensors").string(),
             make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes({9})));
  write_index(R"({"weight_map":{"a":"model-00001-of-00002.safetensors","x":"model-00002-of-00002.safetensors"}})");
  EXPECT_NE(open_error().message().find("appears in both"), std::string::npos);
}

TEST_F(ShardedCheckpoint, RejectsPathEscapesInIndex) {
  write_index(R"({"weight_map":{"a":"../etc/passwd"}})");
  EXPECT_NE(open_error().message().find("not a file in the checkpoint directory"), std::string::npos);
}

TEST_F(ShardedCheckpoint, DirectoryWithoutWeightsIsNotFound) {
  fs::remove(dir_ / "model-00001-of-00002.safetensors");
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  Status s = open_error();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("neither model.safetensors nor model.safetensors.index.json"), std::string::npos);
}

TEST(ValidateTensorSet, ReportsMissingUnexpectedShapeAndDtype) {
  auto dir = fs::temp_directory_path() / ("rlt_validate_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_file((dir / "model.safetensors").string(),
             make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"x":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                       R"("i":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}})",
                       f32_bytes({1, 2, 3, 4})));
  auto ckpt = Checkpoint::open_dir(dir.string());
  ASSERT_TRUE(ckpt.ok());
  Status s = validate_tensor_set(*ckpt, {{"w", {3}}, {"i", {1}}, {"missing.weight", {4}}});
  ASSERT_FALSE(s.ok());
  const std::string& m = s.message();
  EXPECT_NE(m.find("1 missing tensor(s): missing.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("1 unexpected tensor(s): 'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("'w' in"), std::string::npos) << m;
  EXPECT_NE(m.find("is [2] (expected [3])"), std::string::npos) << m;
  EXPECT_NE(m.find("'i' in") , std::string::npos) << m;
  EXPECT_NE(m.find("is I32 (expected F32, BF16 or F16)"), std::string::npos) << m;
  EXPECT_TRUE(validate_tensor_set(*ckpt, {{"w", {2}}, {"x", {1}}}).ok() == false);  // 'i' unexpected
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlt::io

#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors_writer.h"
#include "safetensors_test_util.h"

namespace rlt::io {
namespace {

using testing::f32_bytes;
using testing::make_file;

Result<SafetensorsFile> parse_bytes(const std::vector<uint8_t>& bytes) {
  // Copy into 8-aligned storage so alignment checks see what an mmap would give.
  static std::vector<uint64_t> storage;
  storage.assign((bytes.size() + 7) / 8 + 1, 0);
  std::memcpy(storage.data(), bytes.data(), bytes.size());
  return SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(storage.data()), bytes.size(), "t.safetensors", nullptr);
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  auto r = parse_bytes(bytes);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("t.safetensors"), std::string::npos) << "error must name the file";
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  auto bytes = make_file(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})",
      {0, 0, 128, 63, 0, 0, 0, 64, 0x80, 0x3f, 0, 0x40});
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors().size(), 2u);
  EXPECT_EQ(r->metadata().at("format"), "pt");
  const TensorView& a = r->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(reinterpret_cast<const float*>(a.data)[1], 2.0f);
  EXPECT_EQ(r->tensors()[1].shape, (std::vector<int64_t>{1, 2}));
}

TEST(Safetensors, AcceptsEveryDtypeAndEmptyTensors) {
  auto bytes = make_file(
      R"({"i64":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"i32":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},)"
      R"("f16":{"dtype":"F16","shape":[2],"data_offsets":[12,16]},"u8":{"dtype":"U8","shape":[0],"data_offsets":[16,16]},)"
      R"("b":{"dtype":"BOOL","shape":[],"data_offsets":[16,17]}})",
      std::vector<uint8_t>(17, 1));
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tensors().size(), 5u);
}

TEST(Safetensors, RejectsFileShorterThanLengthPrefix) {
  expect_error({1, 2, 3}, "shorter than the 8-byte length prefix");
}

TEST(Safetensors, RejectsHeaderLengthOverLimit) {
  std::vector<uint8_t> bytes(16, 0);
  bytes[4] = 1;  // 2^32
  expect_error(bytes, "exceeds the");
}

TEST(Safetensors, RejectsHeaderRunningPastEndOfFile) {
  auto bytes = make_file("{}", {});
  bytes[0] = 200;
  expect_error(bytes, "runs past the end");
}

TEST(Safetensors, RejectsInvalidJson) { expect_error(make_file("{\"a\": [", {}), "not valid JSON"); }

TEST(Safetensors, RejectsNonObjectHeader) { expect_error(make_file("[1,2]", {}), "not a JSON object"); }

TEST(Safetensors, RejectsDuplicateTensorNames) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         f32_bytes({1, 2})),
               "'a' is listed twice");
}

TEST(Safetensors, RejectsUnknownDtype) {
  expect_error(make_file(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", {0}),
               "unsupported dtype 'F8_E4M3'");
}

TEST(Safetensors, RejectsBadShape) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f32_bytes({1})),
               "non-negative integers");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":"x","data_offsets":[0,4]}})", f32_bytes({1})),
               "missing array field 'shape'");
}

TEST(Safetensors, RejectsShapeOverflow) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", f32_bytes({1})),
               "overflows");
}

TEST(Safetensors, RejectsMalformedOffsets) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", f32_bytes({1})),
               "must be [begin, end]");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", f32_bytes({1})),
               "begin > end");
}

TEST(Safetensors, RejectsOffsetsPastDataRegion) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1})),
               "run past the data region");
}

TEST(Safetensors, RejectsSizeThatDisagreesWithShape) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
               "needs 12 bytes but data_offsets [0, 8] span 8");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         f32_bytes({1, 2})),
               "overlaps");
}

TEST(Safetensors, RejectsHolesAndTrailingBytes) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32_bytes({1, 2})),
               "unused bytes 0..4");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32_bytes({1, 2})),
               "4 trailing bytes");
}

TEST(Safetensors, RejectsMisalignedData) {
  expect_error(make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"F16","shape":[1],"data_offsets":[2,4]},)"
                         R"("c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"d":{"dtype":"U8","shape":[1],"data_offsets":[8,9]},)"
                         R"("e":{"dtype":"F32","shape":[1],"data_offsets":[9,13]}})",
                         std::vector<uint8_t>(13, 0)),
               "not aligned");
}

TEST(Safetensors, RejectsBadMetadataAndUnknownFields) {
  expect_error(make_file(R"({"__metadata__":{"k":1}})", {}), "is not a string");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", f32_bytes({1})),
               "unknown field 'extra'");
}

TEST(Safetensors, OpenReportsMissingFile) {
  auto r = SafetensorsFile::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIo);
  EXPECT_NE(r.status().message().find("/nonexistent/model.safetensors"), std::string::npos);
}

TEST(Safetensors, WriterOutputRoundTripsThroughReader) {
  auto dir = std::filesystem::temp_directory_path() / "rlt_st_writer";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "w.safetensors").string();
  std::vector<TensorToWrite> ts = {{"z", DType::kF32, {2}, f32_bytes({1.5f, -2})},
                                   {"a", DType::kBF16, {1}, {0x80, 0x3f}}};
  ASSERT_TRUE(write_safetensors(path, ts).ok());
  auto ckpt = Checkpoint::open_file(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  ASSERT_NE(ckpt->find("z"), nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(ckpt->find("z")->data)[0], 1.5f);
  EXPECT_EQ(ckpt->find("a")->dtype, DType::kBF16);
  EXPECT_EQ(ckpt->total_bytes(), 10u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rlt::io

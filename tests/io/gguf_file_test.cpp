// The GGUF container: every value type round-trips through the writer and the reader; malformed
// headers get errors that name the offset and the field.
#include "io/gguf_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>


#include <cstring>
#include <deque>

#include "gguf_test_util.h"

namespace rlt::io {
namespace {

// The parsed file points into its bytes: they are kept for the test's duration.
Result<std::shared_ptr<const GgufFile>> parse(const std::vector<uint8_t>& b) {
  static std::deque<std::vector<uint8_t>> kept;
  kept.push_back(b);
  return GgufFile::parse(kept.back().data(), kept.back().size(), "test.gguf");
}

void expect_gguf_error(const std::vector<uint8_t>& b, const std::string& needle) {
  auto r = parse(b);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

GgufValue scalar(GgufType t) {
  GgufValue v;
  v.type = t;
  return v;
}

TEST(GgufFile, EveryValueTypeRoundTrips) {
  GgufWriter w;
  GgufValue u8 = scalar(GgufType::kU8);
  u8.u64 = 200;
  w.add("u8", u8);
  GgufValue i8 = scalar(GgufType::kI8);
  i8.i64 = -100;
  w.add("i8", i8);
  GgufValue u16 = scalar(GgufType::kU16);
  u16.u64 = 60000;
  w.add("u16", u16);
  GgufValue i16 = scalar(GgufType::kI16);
  i16.i64 = -30000;
  w.add("i16", i16);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  GgufValue u64 = scalar(GgufType::kU64);
  u64.u64 = 1ull << 40;
  w.add("u64", u64);
  GgufValue i64 = scalar(GgufType::kI64);
  i64.i64 = -(1ll << 40);
  w.add("i64", i64);
  w.add_f32("f32", 0.25f);
  GgufValue f64 = scalar(GgufType::kF64);
  f64.f64 = 1e300;
  w.add("f64", f64);
  w.add_bool("bool", true);
  w.add_string("string", "h\xC3\xA9llo");
  w.add_string_array("strings", {"a", "", "c"});
  w.add_i32_array("ints", {1, -2, 3});
  w.add_f32_array("floats", {0.5f, -1.5f});
  GgufValue nested = scalar(GgufType::kArray);
  nested.elem_type = GgufType::kArray;
  GgufValue inner = scalar(GgufType::kArray);
  inner.elem_type = GgufType::kU8;
  inner.elems = {u8, u8};
  nested.elems = {inner, inner};
  w.add("nested", nested);
  ASSERT_TRUE(
      w.add_tensor("t", {64, 2}, quant::GgmlType::kQ8_0, std::vector<uint8_t>(2 * 2 * 34, 0)).ok());
  auto f = parse(w.serialize());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(*g.get_int("u8").value(), 200);
  EXPECT_EQ(*g.get_int("i8").value(), -100);
  EXPECT_EQ(*g.get_int("u16").value(), 60000);
  EXPECT_EQ(*g.get_int("i16").value(), -30000);
  EXPECT_EQ(*g.get_int("u32").value(), 4000000000ll);
  EXPECT_EQ(*g.get_int("i32").value(), -2000000000);
  EXPECT_EQ(*g.get_int("u64").value(), 1ll << 40);
  EXPECT_EQ(*g.get_int("i64").value(), -(1ll << 40));
  EXPECT_EQ(*g.get_float("f32").value(), 0.25);
  EXPECT_EQ(*g.get_float("f64").value(), 1e300);
  EXPECT_EQ(*g.get_float("u32").value(), 4e9) << "integers read as numbers";
  EXPECT_TRUE(*g.get_bool("bool").value());
  EXPECT_EQ(*g.get_string("string").value(), "h\xC3\xA9llo");
  EXPECT_EQ(g.get_string_array("strings").value()->size(), 3u);
  EXPECT_EQ((*g.get_int_array("ints").value())[1], -2);
  EXPECT_EQ((*g.get_float_array("floats").value())[1], -1.5);
  EXPECT_EQ(g.find("nested")->elems[1].elements()[0].u64, 200u);
  EXPECT_FALSE(g.get_string("absent").value().has_value());
  // A value of another type is an error naming the key and both types.
  auto wrong = g.get_string("u32");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'u32' must be a string, but it is the u32 4000000000"),
            std::string::npos)
      << wrong.status().to_string();
  EXPECT_FALSE(g.get_bool("i8").ok());
  EXPECT_FALSE(g.get_string_array("ints").ok());
  const GgufTensor* t = g.find_tensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(t->nbytes, 4u * 34u);
  EXPECT_EQ((t->data - (*f)->tensors()[0].data), 0);
}

TEST(GgufFile, HeaderErrorsNameWhatIsWrong) {
  auto good = testing::tiny_gguf();
  ASSERT_TRUE(parse(good).ok()) << parse(good).status().to_string();
  auto b = good;
  b[0] = 'X';
  expect_gguf_error(b, "does not start with 'GGUF'");
  b = good;
  b[4] = 1;
  expect_gguf_error(b, "GGUF version 1 is obsolete");
  b = good;
  b[4] = 0, b[7] = 3;  // a big-endian version field
  expect_gguf_error(b, "big-endian");
  b = good;
  std::memset(b.data() + 8, 0xff, 8);  // tensor count
  expect_gguf_error(b, "the tensor count 18446744073709551615 is more than the 65536 rlt accepts");
  b = good;
  b.resize(40);
  expect_gguf_error(b, "the metadata count 20 cannot fit in the 16 bytes that remain");
}

TEST(GgufFile, EveryTruncationIsACleanError) {
  const auto good = testing::tiny_gguf();
  // Every prefix up to the data section, and a sample of prefixes into the data.
  size_t checked = 0;
  for (size_t n = 0; n < good.size(); n += n < 4096 ? 1 : 97) {
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<int64_t>(n));
    auto r = parse(b);
    EXPECT_FALSE(r.ok()) << "a " << n << "-byte prefix parsed";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
    ++checked;
  }
  EXPECT_GT(checked, 4000u);
}

TEST(GgufFile, TensorLayoutErrors) {
  auto tensor_file = [](std::vector<std::pair<uint64_t, uint64_t>> offsets_and_rows,
                        uint32_t type = 8) {
    // Hand-built: two tensors with the given data offsets and row counts of 32 values.
    std::vector<uint8_t> out;
    auto put = [&](auto v) {
      const size_t at = out.size();
      out.resize(at + sizeof(v));
      std::memcpy(out.data() + at, &v, sizeof(v));
    };
    put(uint32_t{0x46554747});
    put(uint32_t{3});
    put(uint64_t{offsets_and_rows.size()});
    put(uint64_t{0});
    for (size_t i = 0; i < offsets_and_rows.size(); ++i) {
      const std::string name = fmt::format("t{}", i);
      put(uint64_t{name.size()});
      out.insert(out.end(), name.begin(), name.end());
      put(uint32_t{2});
      put(uint64_t{32});
      put(uint64_t{offsets_and_rows[i].second});
      put(type);
      put(uint64_t{offsets_and_rows[i].first});
    }
    out.resize((out.size() + 31) / 32 * 32 + 4096, 0);
    return out;
  };
  EXPECT_TRUE(parse(tensor_file({{0, 2}, {96, 2}})).ok());
  expect_gguf_error(tensor_file({{0, 2}, {32, 2}}), "overlap");
  expect_gguf_error(tensor_file({{0, 2}, {80, 2}}), "not a multiple of the alignment 32");
  expect_gguf_error(tensor_file({{0, 200}}), "runs past the end of the file");
  expect_gguf_error(tensor_file({{0, 2}}, 4), "unknown GGML type 4");
  expect_gguf_error(tensor_file({{0, 0}}), "empty or overflows");
  expect_gguf_error(tensor_file({{0, 2}, {0, 2}}), "overlap");
}

TEST(GgufFile, CountsAreCappedBeforeAnythingIsAllocated) {
  // A u8 array of 5M elements fits in the file but would cost ~100 bytes per element in memory.
  GgufWriter w;
  GgufValue big = scalar(GgufType::kArray);
  big.elem_type = GgufType::kU8;
  big.elems.resize(5'000'000, scalar(GgufType::kU8));
  w.add("big", big);
  expect_gguf_error(w.serialize(), "claims 5000000 elements; rlt accepts up to 4194304 per array");
  auto b = testing::tiny_gguf();
  const uint64_t many = 1'000'000;
  std::memcpy(b.data() + 8, &many, 8);  // the tensor count
  expect_gguf_error(b, "the tensor count 1000000 is more than the 65536 rlt accepts");
}

TEST(GgufFile, ValuesMayHoldAnyBytesButNamesMustBeUtf8) {
  GgufWriter w;
  w.add_string_array("tokenizer.ggml.tokens", {"\xff\xfe", "a"});  // raw-byte tokens exist
  EXPECT_TRUE(parse(w.serialize()).ok());
  GgufWriter bad;
  bad.add_u32("k\xff", 1);
  expect_gguf_error(bad.serialize(), "the key of metadata entry 0 is not valid UTF-8");
}

TEST(GgufFile, MetadataErrors) {
  GgufWriter w;
  w.add_u32("general.alignment", 3);
  expect_gguf_error(w.serialize(), "general.alignment must be a u32 power of two");
  GgufWriter dup;
  dup.add_u32("ka", 1);
  dup.add_u32("kb", 2);
  auto dup_bytes = dup.serialize();
  dup_bytes[24 + 8 + 2 + 4 + 4 + 8 + 1] = 'a';  // the second key's last letter
  expect_gguf_error(dup_bytes, "'ka' appears twice");
  GgufWriter bad_bool;
  GgufValue b = scalar(GgufType::kBool);
  bad_bool.add("k", b);
  auto bytes = bad_bool.serialize();
  bytes[24 + 8 + 1 + 4] = 7;  // the bool after the header, the key "k" and its type
  expect_gguf_error(bytes, "a bool stored as 7");
}

}  // namespace
}  // namespace rlt::io

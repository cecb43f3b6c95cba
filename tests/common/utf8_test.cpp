#include "common/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace rlt::utf8 {
namespace {

const std::string kFffd(kReplacementUtf8);

TEST(Utf8, ValidatesWellFormedText) {
  EXPECT_TRUE(is_valid(""));
  EXPECT_TRUE(is_valid("plain ascii text that is longer than eight bytes"));
  EXPECT_TRUE(is_valid("h\xC3\xA9llo \xE6\x97\xA5 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid("abc\xE6\x97"));       // truncated
}

TEST(Utf8, RepairReplacesEachMaximalSubpartLikePython) {
  // Expected values: Python bytes.decode("utf-8", "replace").
  EXPECT_EQ(repair("a\xFF"
                   "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(repair("\xE6\x97"), kFffd);  // one truncated sequence
  EXPECT_EQ(repair("\xE6\x97"
                   "a"),
            kFffd + "a");
  EXPECT_EQ(repair("\xC0\xAF"), kFffd + kFffd);              // C0 is never a lead byte
  EXPECT_EQ(repair("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // A0 not allowed after ED
  EXPECT_EQ(repair("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(repair("\xF0\x9F\x98"
                   "\xF0\x9F\x98\x80"),
            kFffd + "\xF0\x9F\x98\x80");
  EXPECT_EQ(repair("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

TEST(Utf8, LossyDecoderMatchesRepairForEveryChunking) {
  std::mt19937 rng(7);
  const std::string pieces[] = {"a",        "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80", "\xFF",
                                "\xE6\x97", "\x80",     "\xED\xA0\x80", "\xF4\x90"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) bytes += pieces[rng() % std::size(pieces)];
    LossyDecoder dec;
    std::string out;
    size_t i = 0;
    while (i < bytes.size()) {
      const size_t step = 1 + rng() % 3;
      const std::string chunk = bytes.substr(i, step);
      std::string piece;
      dec.push(chunk, piece);
      EXPECT_TRUE(is_valid(piece));
      out += piece;
      i += step;
    }
    dec.finish(out);
    EXPECT_EQ(out, repair(bytes));
  }
}

}  // namespace
}  // namespace rlt::utf8

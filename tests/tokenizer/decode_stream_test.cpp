// Streaming detokenization: for random id sequences the pieces are complete UTF-8 and join to
// exactly Tokenizer::decode, for decoder chains that hold text back in every way.
#include "tokenizer/decode_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "common/utf8.h"

namespace rlt::tok {
namespace {

// Vocabulary with byte tokens, multi-byte characters, metaspace and strip/replace bait.
std::string tokenizer_json(const std::string& decoder) {
  std::string vocab = R"("<unk>":0,"▁":1,"a":2,"b":3,"ab":4,"▁a":5,"é":6,"  ":7,"日":8,"x":9)";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab += ",\"" + std::string(name) + "\":" + std::to_string(10 + b);
  }
  return R"({"added_tokens":[{"id":266,"content":"<s>","special":true},)"
         R"({"id":267,"content":"<t>","special":false}],)"
         R"("decoder":)" +
         decoder + R"(,"model":{"type":"BPE","vocab":{)" + vocab +
         R"(},"merges":["a b"],"byte_fallback":true,"unk_token":"<unk>"}})";
}

const char* kDecoders[] = {
    "null",
    R"({"type":"ByteLevel"})",
    R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
        {"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})",
    R"({"type":"Sequence","decoders":[{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"},
        {"type":"ByteFallback"},{"type":"Fuse"}]})",
    R"({"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Fuse"},
        {"type":"Replace","pattern":{"String":"ab"},"content":"X"},
        {"type":"Strip","content":" ","start":2,"stop":3}]})",
    R"({"type":"Sequence","decoders":[{"type":"Fuse"},
        {"type":"Replace","pattern":{"Regex":"a+"},"content":"-"},{"type":"ByteFallback"},
        {"type":"Metaspace","replacement":"▁","add_prefix_space":true}]})",
    R"({"type":"Sequence","decoders":[{"type":"Strip","content":"▁","start":1,"stop":1},
        {"type":"ByteLevel"},{"type":"Strip","content":" ","start":0,"stop":2}]})",
};

TEST(IncrementalDetokenizer, JoinedPiecesEqualFullDecodeForRandomSequences) {
  std::mt19937 rng(42);
  for (const char* decoder : kDecoders) {
    auto loaded = Tokenizer::from_json_string(tokenizer_json(decoder));
    ASSERT_TRUE(loaded.ok()) << decoder << ": " << loaded.status().to_string();
    const auto& tok = *loaded;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<int32_t> ids(rng() % 12);
      for (auto& id : ids) {
        // Favor byte tokens of multi-byte characters (0xC3 0xA9, 0xE6 0x97 0xA5) and specials.
        const int roll = static_cast<int>(rng() % 10);
        if (roll < 3) {
          const int bytes[] = {0xC3, 0xA9, 0xE6, 0x97, 0xA5, 0x20, 0x41, 0xFF, 0x80};
          id = 10 + bytes[rng() % std::size(bytes)];
        } else {
          id = static_cast<int32_t>(rng() % 270);  // includes ids with no token
        }
      }
      for (bool skip : {false, true}) {
        IncrementalDetokenizer detok(tok, skip);
        std::string joined;
        for (int32_t id : ids) {
          const std::string piece = detok.push(id);
          ASSERT_TRUE(utf8::is_valid(piece));
          joined += piece;
        }
        joined += detok.flush();
        auto full = tok->decode(ids, skip);
        ASSERT_TRUE(full.ok());
        ASSERT_EQ(joined, *full) << "decoder " << decoder << ", trial " << trial;
      }
    }
  }
}

TEST(IncrementalDetokenizer, HoldsBackIncompleteCharactersOnly) {
  auto loaded = Tokenizer::from_json_string(tokenizer_json(R"({"type":"Sequence","decoders":[
      {"type":"ByteFallback"},{"type":"Fuse"}]})"));
  ASSERT_TRUE(loaded.ok());
  IncrementalDetokenizer detok(*loaded, true);
  EXPECT_EQ(detok.push(2), "a");
  EXPECT_EQ(detok.push(10 + 0xE6), "");  // first byte of 日: held
  EXPECT_EQ(detok.push(10 + 0x97), "");
  EXPECT_EQ(detok.push(10 + 0xA5), "");  // complete, but a following byte token could spoil it
  EXPECT_EQ(detok.push(3),
            "\xE6\x97\xA5"
            "b");
  EXPECT_EQ(detok.push(266), "");  // special token, skipped
  EXPECT_EQ(detok.push(10 + 0xC3), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");  // a lone lead byte decodes to U+FFFD
  EXPECT_EQ(detok.push(2), "a");             // flush started a new sequence
}

TEST(IncrementalDetokenizer, ByteLevelEmitsEachCharacterOnceComplete) {
  auto loaded = Tokenizer::from_json_string(tokenizer_json(R"({"type":"ByteLevel"})"));
  ASSERT_TRUE(loaded.ok());
  IncrementalDetokenizer detok(*loaded, false);
  // "é" is the byte-level character for byte 0xE9: a lead byte alone.
  EXPECT_EQ(detok.push(6), "");
  EXPECT_EQ(detok.push(2),
            "\xEF\xBF\xBD"
            "a");  // 0xE9 then 'a': invalid, replaced
  EXPECT_EQ(detok.flush(), "");
}

}  // namespace
}  // namespace rlt::tok

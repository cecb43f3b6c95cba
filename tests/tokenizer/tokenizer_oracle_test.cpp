// Oracle tests: for each tokenizer under test, ≥ 10,000 generated inputs must encode to exactly
// the ids Hugging Face `tokenizers` produces, and ids must decode to exactly HF's text. The
// expected values are produced now by tools/tokenizer_oracle.py in the project venv.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "oracle_support.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace rlt::tok {
namespace {

using testing::escape;
using testing::ids_to_string;

constexpr int kCases = 10000;

// "train:KIND" (trained now) or "fixture:FILE" (a tokenizer.json of the shared fixtures).
std::vector<std::string> oracle_specs() {
  std::vector<std::string> specs = {"train:bytelevel",
                                    "train:split_regex",
                                    "train:metaspace_byte_fallback",
                                    "train:llama2_normalizer_style",
                                    "train:components",
                                    "train:splits",
                                    "train:whitespace_words",
                                    "train:metaspace_split"};
  const std::string dir = testing::fixtures_dir() + "/tokenizers";
  std::vector<std::string> files;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 15 && name.ends_with(".tokenizer.json")) files.push_back(name);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) files.push_back("<absent>");
  for (const auto& f : files) specs.push_back("fixture:" + f);
  return specs;
}

std::string spec_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n;
  for (char c : info.param) n.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return n;
}

// Where two id sequences first differ, with the tokens around that point.
std::string first_difference(const Tokenizer& tok, const std::vector<int32_t>& want,
                             const std::vector<int32_t>& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto window = [&](const std::vector<int32_t>& ids) {
    std::string out;
    for (size_t k = i >= 3 ? i - 3 : 0; k < ids.size() && k < i + 6; ++k) {
      out += std::to_string(ids[k]) + "'" + escape(tok.id_to_token(ids[k]).value_or("?")) + "' ";
    }
    return out;
  };
  return "first difference at id " + std::to_string(i) + "\n  want " + window(want) + "\n  got  " +
         window(got);
}

struct Mismatches {
  int count = 0;
  std::string examples;
  void add(const std::string& what) {
    if (++count <= 5) examples += what + "\n";
  }
};

// Runs the oracle for `spec` in `workdir`; returns false (with the reason) when HF refused it.
bool run_oracle(const std::string& spec, const std::string& workdir, std::string& hf_error) {
  std::string out;
  const int rc = testing::run_python(
      "tokenizer_oracle.py",
      "--tokenizer '" + spec + "' --workdir '" + workdir + "' --count " + std::to_string(kCases),
      out);
  EXPECT_EQ(rc, 0) << "oracle failed for " << spec << ":\n" << out;
  if (testing::path_exists(workdir + "/error.txt")) {
    hf_error = testing::read_file(workdir + "/error.txt");
    return false;
  }
  return rc == 0;
}

void compare_with_oracle(const std::string& workdir) {
  auto loaded = Tokenizer::from_file(workdir + "/tokenizer.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Tokenizer& tok = **loaded;
  const auto cases = testing::read_jsonl(workdir + "/cases.jsonl");
  ASSERT_GE(cases.size(), static_cast<size_t>(kCases));
  Mismatches enc, dec, stream;
  int encoded = 0;
  for (const auto& c : cases) {
    std::vector<int32_t> ids;
    if (c.contains("hex")) {
      ++encoded;
      const std::string input = testing::from_hex(c["hex"].get<std::string>());
      const auto want = c["ids"].get<std::vector<int32_t>>();
      const auto want_plain = c["ids_plain"].get<std::vector<int32_t>>();
      auto got = tok.encode(input, true);
      auto got_plain = tok.encode(input, false);
      if (!got.ok() || *got != want) {
        enc.add("input \"" + escape(input) + "\"\n  " +
                (got.ok() ? first_difference(tok, want, *got) : got.status().to_string()));
      } else if (!got_plain.ok() || *got_plain != want_plain) {
        enc.add("(no specials) input \"" + escape(input) + "\"\n  want " +
                ids_to_string(want_plain) + "\n  got  " +
                (got_plain.ok() ? ids_to_string(*got_plain) : got_plain.status().to_string()));
      }
      ids = want;
    } else {
      ids = c["decode_ids"].get<std::vector<int32_t>>();
    }
    for (bool skip : {false, true}) {
      const std::string want = c[skip ? "dec_skip" : "dec"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (!got.ok() || *got != want) {
        dec.add(std::string("ids ") + ids_to_string(ids) + (skip ? " (skip special)" : "") +
                "\n  want \"" + escape(want) + "\"\n  got  \"" +
                (got.ok() ? escape(*got) : got.status().to_string()) + "\"");
      }
      // Streaming: pieces are complete UTF-8 and join to HF's decode.
      IncrementalDetokenizer detok(*loaded, skip);
      std::string joined;
      bool valid = true;
      for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        valid = valid && utf8::is_valid(piece);
        joined += piece;
      }
      joined += detok.flush();
      if (!valid || joined != want) {
        stream.add(std::string("ids ") + ids_to_string(ids) + (skip ? " (skip special)" : "") +
                   (valid ? "" : " (invalid UTF-8 piece)") + "\n  want \"" + escape(want) +
                   "\"\n  got  \"" + escape(joined) + "\"");
      }
    }
  }
  EXPECT_GE(encoded, kCases);
  EXPECT_EQ(enc.count, 0) << enc.count << " of " << encoded << " inputs encode differently:\n"
                          << enc.examples;
  EXPECT_EQ(dec.count, 0) << dec.count << " decodes differ:\n" << dec.examples;
  EXPECT_EQ(stream.count, 0) << stream.count << " streamed decodes differ:\n" << stream.examples;
}

class TokenizerOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerOracle, IdsAndTextMatchHuggingFace) {
  const std::string spec = GetParam();
  if (!testing::venv_python()) {
    GTEST_SKIP() << "no " << testing::source_dir() << "/.venv: run scripts/setup.sh";
  }
  const bool fixture = spec.starts_with("fixture:");
  const std::string file = fixture ? spec.substr(8) : "";
  if (fixture && file == "<absent>") {
    GTEST_SKIP() << "shared fixtures not found at " << testing::fixtures_dir()
                 << "/tokenizers: real tokenizer.json files are not tested";
  }
  const std::string workdir = testing::make_workdir(spec_name({spec, 0}));
  // Work files are large (a copy of the tokenizer and the cases): kept only after a failure.
  struct Cleanup {
    std::vector<std::string> dirs;
    ~Cleanup() {
      if (::testing::Test::HasFailure()) {
        for (const auto& d : dirs) std::cout << "[ kept ] " << d << "\n";
        return;
      }
      for (const auto& d : dirs) std::filesystem::remove_all(d);
    }
  } cleanup{{workdir}};
  if (!fixture) {
    std::string hf_error;
    ASSERT_TRUE(run_oracle(spec, workdir, hf_error)) << hf_error;
    compare_with_oracle(workdir);
    return;
  }
  const std::string path = testing::fixtures_dir() + "/tokenizers/" + file;
  std::string hf_error;
  if (run_oracle("file:" + path, workdir, hf_error)) {
    compare_with_oracle(workdir);
    return;
  }
  // HF refuses this file: rlt must refuse it too, with a clear message.
  auto loaded = Tokenizer::from_file(path);
  EXPECT_FALSE(loaded.ok()) << "HF refuses " << file << " (" << hf_error << ") but rlt loads it";
  if (!loaded.ok()) {
    EXPECT_NE(loaded.status().message().find(file), std::string::npos)
        << loaded.status().to_string();
    std::cout << "[ rlt refuses " << file << " like HF ] " << loaded.status().to_string() << "\n";
  }
  // Still check everything else in the file: the same tokenizer minus the offending merges.
  const std::string patched = testing::make_workdir(spec_name({spec, 0}) + "_patched");
  cleanup.dirs.push_back(patched);
  ASSERT_TRUE(run_oracle("patched:" + path, patched, hf_error)) << hf_error;
  compare_with_oracle(patched);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerOracle, ::testing::ValuesIn(oracle_specs()), spec_name);

}  // namespace
}  // namespace rlt::tok

// Oracle tests: for each tokenizer under test, ≥ 10,000 generated inputs must encode to exactly
// the ids Hugging Face `tokenizers` produces, and ids must decode to exactly HF's text. The
// expected values are produced now by tools/tokenizer_oracle.py in the project venv.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/utf8.h"
#include "oracle_support.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/tokenizer.h"

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
    ASSERT_TRUE(testing::run_oracle(spec, workdir, hf_error, kCases)) << hf_error;
    testing::compare_with_oracle(workdir, kCases);
    return;
  }
  const std::string path = testing::fixtures_dir() + "/tokenizers/" + file;
  std::string hf_error;
  if (testing::run_oracle("file:" + path, workdir, hf_error, kCases)) {
    testing::compare_with_oracle(workdir, kCases);
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
  ASSERT_TRUE(testing::run_oracle("patched:" + path, patched, hf_error, kCases)) << hf_error;
  testing::compare_with_oracle(patched, kCases);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerOracle, ::testing::ValuesIn(oracle_specs()), spec_name);

}  // namespace
}  // namespace rlt::tok

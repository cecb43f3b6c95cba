// The structured-output engine alone, at a real vocabulary: compile time of each schema of
// tests/data/structured/schemas.json, and the time of one step's token mask along a seeded random
// walk of allowed tokens — cold (a fresh grammar: its frame tables and step masks are built as the
// walk meets them) and warm (the same walk again: the step-mask cache answers).
//
//   rlt_mask_bench [MODEL (GGUF file or folder)] [--steps N]
//
// Default model: SmolLM2-135M-Instruct.Q4_1.gguf in rlt's cache (scripts/setup.sh fetches it).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "source/model_source.h"
#include "structured/grammar_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/token_bytes.h"

namespace {

using Clock = std::chrono::steady_clock;
using rlt::structured::GrammarMatcher;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string default_model() {
  const char* cache = std::getenv("RLT_CACHE_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir = cache ? cache : std::string(home ? home : "/root") + "/.cache/rlt";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = default_model();
  int steps = 120;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      model = a;
    }
  }
  auto src = rlt::source::ModelSource::open(model);
  if (!src.ok()) {
    fmt::print(stderr, "{}\n", src.status().to_string());
    return 1;
  }
  auto tokenizer = src->tokenizer();
  if (!tokenizer.ok()) {
    fmt::print(stderr, "{}\n", tokenizer.status().to_string());
    return 1;
  }
  auto t0 = Clock::now();
  auto vocab = std::make_shared<const rlt::structured::TokenVocabulary>(
      rlt::tok::token_byte_strings(**tokenizer), (*tokenizer)->vocab_size());
  fmt::print("vocabulary: {} tokens, trie of {} nodes built in {:.1f} ms\n", vocab->vocab_size(),
             vocab->nodes().size(), 1e3 * seconds_since(t0));
  const auto eos = (*tokenizer)->token_to_id("<|im_end|>");
  const std::vector<int32_t> terminators =
      eos ? std::vector<int32_t>{*eos} : std::vector<int32_t>{};

  std::ifstream in(std::string(RLT_SOURCE_DIR) + "/tests/data/structured/schemas.json");
  const auto cases = nlohmann::json::parse(in);
  double compile_s = 0, cold_s = 0, warm_s = 0, worst_cold = 0;
  int64_t tokens = 0;
  std::vector<uint64_t> mask(vocab->mask_words());
  for (const auto& c : cases) {
    rlt::structured::GrammarCompiler compiler(vocab);
    rlt::StructuredOutputs spec{rlt::StructuredOutputs::Kind::kJsonSchema, c["schema"].dump(), {}};
    t0 = Clock::now();
    auto grammar = compiler.compile(spec);
    compile_s += seconds_since(t0);
    if (!grammar.ok()) {
      fmt::print(stderr, "{}: {}\n", c["name"].get<std::string>(), grammar.status().to_string());
      return 1;
    }
    std::mt19937 rng(7);
    std::vector<int32_t> walk;
    GrammarMatcher cold(*grammar, terminators);
    for (int s = 0; s < steps && !cold.is_terminated(); ++s) {
      t0 = Clock::now();
      cold.fill_next_token_mask(mask);
      const double dt = seconds_since(t0);
      cold_s += dt;
      worst_cold = std::max(worst_cold, dt);
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < mask.size(); ++w) {
        for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
      }
      if (allowed.empty()) break;
      // End as soon as the grammar allows it, so that walks finish their objects.
      const bool can_end = eos && std::find(allowed.begin(), allowed.end(), *eos) != allowed.end();
      const int32_t pick = can_end ? *eos : allowed[rng() % allowed.size()];
      cold.accept_token(pick);
      walk.push_back(pick);
    }
    GrammarMatcher warm(*grammar, terminators);
    for (int32_t t : walk) {
      t0 = Clock::now();
      warm.fill_next_token_mask(mask);
      warm_s += seconds_since(t0);
      warm.accept_token(t);
    }
    tokens += static_cast<int64_t>(walk.size());
  }
  fmt::print(
      "{} schemas, {} tokens: compile {:.2f} ms per schema; mask per token: cold {:.1f} us (worst "
      "{:.1f} ms), "
      "warm {:.2f} us\n",
      cases.size(), tokens, 1e3 * compile_s / static_cast<double>(cases.size()),
      1e6 * cold_s / static_cast<double>(tokens), 1e3 * worst_cold,
      1e6 * warm_s / static_cast<double>(tokens));
  return 0;
}

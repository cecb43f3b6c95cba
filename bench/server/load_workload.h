// The load test's requests: random token-id prompts (so the offline reference needs no
// tokenizer), lengths, sampling (greedy or seeded), exit thresholds and which requests the
// client cancels midway. Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace rlt::bench {

struct LoadRequest {
  int index = 0;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  double temperature = 0.0;
  std::optional<uint64_t> seed;  // set for sampled requests, so server and offline agree
  double exit_threshold = 1.0;
  bool ignore_eos = false;
  int64_t cancel_after = 0;      // > 0: the client hangs up after this many tokens
};

struct WorkloadOptions {
  int requests = 256;
  int min_prompt = 4, max_prompt = 48;
  int min_tokens = 8, max_tokens = 96;
  double cancel_fraction = 0.1;
  int64_t vocab_size = 259;
  int first_token_id = 3;  // skip special tokens in prompts
  uint64_t seed = 1;
};

std::vector<LoadRequest> make_workload(const WorkloadOptions& options);

}  // namespace rlt::bench

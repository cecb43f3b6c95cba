#include "load_workload.h"

#include <random>

namespace rlt::bench {

std::vector<LoadRequest> make_workload(const WorkloadOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<LoadRequest> out;
  for (int i = 0; i < o.requests; ++i) {
    LoadRequest r;
    r.index = i;
    const int64_t len = uniform(o.min_prompt, o.max_prompt);
    for (int64_t k = 0; k < len; ++k) r.prompt.push_back(static_cast<int32_t>(uniform(o.first_token_id, o.vocab_size - 1)));
    r.max_tokens = uniform(o.min_tokens, o.max_tokens);
    if (i % 2 == 1) {  // half greedy, half seeded sampling
      r.temperature = 0.8;
      r.seed = 1000 + static_cast<uint64_t>(i);
    }
    r.exit_threshold = (i % 3 == 0) ? 1.0 : (i % 3 == 1 ? 0.9 : 0.6);  // mixed depths share batches
    r.ignore_eos = i % 4 != 0;
    if (std::uniform_real_distribution<double>(0, 1)(rng) < o.cancel_fraction)
      r.cancel_after = uniform(1, std::max<int64_t>(1, r.max_tokens / 2));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace rlt::bench

#include "offline_reference.h"

#include <fmt/format.h>

namespace rlt::bench {

Result<std::vector<Reference>> run_offline(const EngineConfig& config, const std::vector<LoadRequest>& requests) {
  RLT_ASSIGN_OR_RETURN(auto engine, Engine::create(config));
  std::vector<Reference> out(requests.size());
  for (const LoadRequest& r : requests) {
    SamplingParams p;
    p.max_tokens = r.max_tokens;
    p.temperature = r.temperature;
    p.seed = r.seed;
    p.exit_threshold = r.exit_threshold;
    p.min_loops = 1;
    p.ignore_eos = r.ignore_eos;
    RLT_RETURN_IF_ERROR(engine->add_request(static_cast<uint64_t>(r.index), r.prompt, p));
  }
  // Bounded: every step makes progress on some request.
  std::vector<RequestResult> results(requests.size());
  for (int64_t step = 0; step < int64_t{10'000'000} && engine->has_unfinished(); ++step) {
    RLT_ASSIGN_OR_RETURN(auto outputs, engine->step());
    for (const RequestOutput& o : outputs) {
      RequestResult& r = results.at(o.request_id);
      r.append(o);
      if (!o.finished) continue;
      Reference& ref = out.at(o.request_id);
      ref.tokens = r.token_ids;
      ref.exit_depths = r.exit_depths;
      ref.finish_reason = r.finish_reason;
    }
  }
  if (engine->has_unfinished()) return internal_error("the offline run did not finish");
  return out;
}

}  // namespace rlt::bench

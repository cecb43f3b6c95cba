#include "load_report.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

namespace rlt::bench {
namespace {

void check_result(const ServedResult& r, const Reference& ref, LoadSummary* s) {
  auto problem = [&](const std::string& what) {
    if (s->problems.size() < 50) s->problems.push_back(fmt::format("request {}: {}", r.index, what));
  };
  if (r.cancelled) {
    ++s->cancelled;
    if (r.tokens.size() > ref.tokens.size() || !std::equal(r.tokens.begin(), r.tokens.end(), ref.tokens.begin()))
      problem("a cancelled stream's tokens are not a prefix of the offline output");
    return;
  }
  if (!r.error.empty()) {
    ++s->failed;
    return problem(r.error);
  }
  ++s->completed;
  if (r.tokens != ref.tokens)
    problem(fmt::format("tokens differ from offline ({} vs {} tokens)", r.tokens.size(), ref.tokens.size()));
  if (r.exit_depths != ref.exit_depths) problem("exit depths differ from offline");
  if (r.finish_reason != ref.finish_reason)
    problem(fmt::format("finish_reason {} vs offline {}", r.finish_reason, ref.finish_reason));
  if (!r.done_marker) problem("no data: [DONE]");
  if (r.usage_completion_tokens != static_cast<int64_t>(r.tokens.size()))
    problem(fmt::format("usage says {} tokens, the stream had {}", r.usage_completion_tokens, r.tokens.size()));
  if (r.token_chunks != static_cast<int64_t>(r.tokens.size())) problem("not one chunk per token");
}

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = v.back();
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return p;
}

LoadSummary summarize(const std::vector<ServedResult>& results,
                      const std::vector<Reference>& references, double wall_s) {
  LoadSummary s;
  s.wall_s = wall_s;
  s.requests = static_cast<int>(results.size());
  std::vector<double> ttft, itl, e2e;
  for (const ServedResult& r : results) {
    check_result(r, references.at(static_cast<size_t>(r.index)), &s);
    s.retries_429 += r.retries;
    s.tokens += static_cast<int64_t>(r.tokens.size());
    if (!r.tokens.empty()) ttft.push_back(r.ttft_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (!r.cancelled && r.error.empty()) e2e.push_back(r.e2e_s);
  }
  s.ttft = percentiles(ttft);
  s.itl = percentiles(itl);
  s.e2e = percentiles(e2e);
  return s;
}

std::string to_text(const LoadSummary& s) {
  auto row = [](const char* name, const Percentiles& p) {
    return fmt::format("  {:<5} p50 {:8.2f} ms  p90 {:8.2f} ms  p99 {:8.2f} ms  max {:8.2f} ms  (n = {})\n", name,
                       p.p50 * 1e3, p.p90 * 1e3, p.p99 * 1e3, p.max * 1e3, p.n);
  };
  std::string out = fmt::format(
      "{} requests in {:.2f} s: {} completed, {} cancelled by the client, {} failed ({} answers 429 retried)\n"
      "  throughput {:.1f} tokens/s, {:.1f} requests/s\n",
      s.requests, s.wall_s, s.completed, s.cancelled, s.failed, s.retries_429, static_cast<double>(s.tokens) / s.wall_s,
      static_cast<double>(s.requests) / s.wall_s);
  out += row("TTFT", s.ttft) + row("ITL", s.itl) + row("E2E", s.e2e);
  out += fmt::format("  KV usage back to zero: {}\n", s.kv_back_to_zero ? "yes" : "NO");
  if (s.problems.empty()) out += "  every completed request matches the offline run token for token\n";
  for (const auto& p : s.problems) out += "  PROBLEM: " + p + "\n";
  return out;
}

nlohmann::json to_json(const LoadSummary& s) {
  auto pj = [](const Percentiles& p) {
    return nlohmann::json{{"p50_ms", p.p50 * 1e3}, {"p90_ms", p.p90 * 1e3}, {"p99_ms", p.p99 * 1e3},
                          {"mean_ms", p.mean * 1e3}, {"max_ms", p.max * 1e3}, {"n", p.n}};
  };
  return {{"requests", s.requests}, {"completed", s.completed}, {"cancelled", s.cancelled}, {"failed", s.failed}, {"retries_429", s.retries_429},
          {"wall_s", s.wall_s}, {"tokens", s.tokens}, {"tokens_per_s", static_cast<double>(s.tokens) / s.wall_s},
          {"requests_per_s", static_cast<double>(s.requests) / s.wall_s}, {"ttft", pj(s.ttft)}, {"itl", pj(s.itl)},
          {"e2e", pj(s.e2e)}, {"kv_back_to_zero", s.kv_back_to_zero}, {"problems", s.problems}};
}

}  // namespace rlt::bench

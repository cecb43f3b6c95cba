// rlt_server_load: a bounded load test for `rlt serve`. Many concurrent streaming clients send
// the workload (some hang up midway), then the tool checks that every completed request returned
// exactly what the same request returns offline, that the server's KV usage is back to zero, and
// reports throughput and TTFT / ITL / end-to-end percentiles. Exit status 0 when every check
// passes. Results are recorded in docs/serving.md.
//
//   rlt serve --port 8000 &
//   rlt_server_load --port 8000 --clients 64 --requests 256
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <httplib.h>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "io/model_config.h"
#include "load_client.h"
#include "load_report.h"
#include "model/demo_checkpoint.h"
#include "offline_reference.h"

namespace {

using namespace rlt;
using namespace rlt::bench;

struct Options {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model_name;  // default: the server's only model
  std::string model_dir;   // for the offline reference; default: the demo model
  int clients = 64;
  WorkloadOptions workload;
  std::string attention_backend = "auto";
  std::string kv_dtype = "auto";
  int threads = 0;
  int offline_max_num_seqs = 64;  // outputs do not depend on batching: batch wide for speed
  std::string json_out;
};

// A gauge from the server's /metrics text (-1 when missing).
double metric(httplib::Client& cli, const std::string& name) {
  auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

bool wait_until_idle(httplib::Client& cli) {
  for (int i = 0; i < 200; ++i) {  // up to 10 s
    if (metric(cli, "rlt_requests_in_flight") == 0 && metric(cli, "rlt_kv_cache_used_blocks") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int run(Options o) {
  set_log_level(LogLevel::kWarn);
  httplib::Client cli(o.host, o.port);
  if (o.model_name.empty()) {
    auto res = cli.Get("/v1/models");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "error: no rlt serve answering GET /v1/models at %s:%d\n", o.host.c_str(), o.port);
      return 1;
    }
    o.model_name = nlohmann::json::parse(res->body)["data"][0]["id"].get<std::string>();
  }
  if (o.model_dir.empty()) {
    auto dir = model::ensure_demo_checkpoint();
    if (!dir.ok()) return std::fprintf(stderr, "error: %s\n", dir.status().to_string().c_str()), 1;
    o.model_dir = *dir;
  }
  auto config = io::load_model_config(o.model_dir + "/config.json");
  if (!config.ok()) return std::fprintf(stderr, "error: %s\n", config.status().to_string().c_str()), 1;
  o.workload.vocab_size = config->vocab_size;
  const std::vector<LoadRequest> workload = make_workload(o.workload);

  // Offline first, so it does not compete with the server for the CPU during the timed run.
  EngineConfig ec;
  ec.model = o.model_dir;
  ec.attention_backend = o.attention_backend;
  auto kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (!kv_dtype.ok())
    return std::fprintf(stderr, "error: %s\n", kv_dtype.status().to_string().c_str()), 1;
  ec.kv_dtype = *kv_dtype;
  ec.threads = o.threads;
  ec.max_num_seqs = o.offline_max_num_seqs;
  ec.max_num_batched_tokens = std::max(ec.max_num_batched_tokens, o.offline_max_num_seqs);
  const auto offline_start = std::chrono::steady_clock::now();
  auto references = run_offline(ec, workload);
  const double offline_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - offline_start).count();
  if (!references.ok()) return std::fprintf(stderr, "error: offline run: %s\n", references.status().to_string().c_str()), 1;

  std::vector<ServedResult> results(workload.size());
  std::atomic<size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&] {
      for (size_t i = next++; i < workload.size(); i = next++)
        results[i] = run_request(o.host, o.port, o.model_name, workload[i]);
    });
  }
  for (auto& t : clients) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  LoadSummary summary = summarize(results, *references, wall);
  summary.kv_back_to_zero = wait_until_idle(cli);
  std::fputs(fmt::format("rlt_server_load: {} clients against {}:{} ({}); offline reference took {:.1f} s\n",
                         o.clients, o.host, o.port, o.model_name, offline_s).c_str(), stdout);
  std::fputs(to_text(summary).c_str(), stdout);
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    nlohmann::json j = to_json(summary);
    j["clients"] = o.clients;
    f << j.dump(2) << "\n";
  }
  return summary.problems.empty() && summary.failed == 0 && summary.kv_back_to_zero ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Load test for rlt serve: concurrent streaming clients, random cancellations, offline comparison"};
  app.add_option("--host", o.host)->capture_default_str();
  app.add_option("--port", o.port)->capture_default_str();
  app.add_option("--model-name", o.model_name, "Model name to request (default: the server's)");
  app.add_option("--model", o.model_dir, "Model folder for the offline reference (default: the demo model)");
  app.add_option("--clients", o.clients, "Concurrent streaming clients")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--requests", o.workload.requests, "Requests in total")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--min-prompt", o.workload.min_prompt)->capture_default_str();
  app.add_option("--max-prompt", o.workload.max_prompt)->capture_default_str();
  app.add_option("--min-tokens", o.workload.min_tokens)->capture_default_str();
  app.add_option("--max-tokens", o.workload.max_tokens)->capture_default_str();
  app.add_option("--cancel-fraction", o.workload.cancel_fraction, "Share of requests the client hangs up on")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.workload.seed, "Workload seed")->capture_default_str();
  app.add_option("--attention-backend", o.attention_backend, "Offline engine: as the server's")->capture_default_str();
  app.add_option("--kv-dtype", o.kv_dtype, "Offline engine: as the server's")->capture_default_str();
  app.add_option("--threads", o.threads, "Offline engine threads (0 = all cores)")->capture_default_str();
  app.add_option("--offline-max-num-seqs", o.offline_max_num_seqs, "Offline engine batch size")->capture_default_str();
  app.add_option("--json", o.json_out, "Also write the summary as JSON here");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}

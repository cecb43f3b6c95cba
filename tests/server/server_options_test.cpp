// The serving limits that follow the engine's batch width: --max-requests 0 and the HTTP pool.
#include "server/server_options.h"

#include <gtest/gtest.h>

#include "rlt/engine.h"

namespace rlt::server {
namespace {

int resolved_limit(const std::string& device, int max_num_seqs = 0, int max_requests = 0) {
  EngineConfig engine;
  engine.device = device;
  engine.max_num_seqs = max_num_seqs;
  ServerOptions options;
  options.max_requests = max_requests;
  return options.resolved(with_device_defaults(engine).max_num_seqs).max_requests;
}

TEST(ServerOptions, RequestLimitFollowsTheEnginesBatchWidth) {
  EXPECT_EQ(resolved_limit("cpu"), 64);    // 8 rows: the floor
  EXPECT_EQ(resolved_limit("cuda"), 512);  // a GPU's 256 rows, twice
  EXPECT_EQ(resolved_limit("cuda:1"), 512);
  EXPECT_EQ(resolved_limit("cpu", 100), 200);  // --max-num-seqs given
  EXPECT_EQ(resolved_limit("cuda", 16), 64);
  EXPECT_EQ(resolved_limit("cuda", 0, 3), 3);    // --max-requests given wins
  EXPECT_EQ(resolved_limit("cpu", 3000), 4096);  // the flag's own ceiling
  EXPECT_EQ(resolved_limit("cpu", 2000000000), 4096);
}

TEST(ServerOptions, HttpThreadsCoverTheResolvedLimit) {
  ServerOptions options;
  EXPECT_EQ(options.resolved(256).resolved_http_threads(), 2 * 512 + 8);
  options.http_threads = 5;
  EXPECT_EQ(options.resolved(256).resolved_http_threads(), 5);
}

TEST(EngineDefaults, DeviceDefaultsFillOnlyTheKnobsLeftAtZero) {
  EngineConfig cpu;
  const EngineConfig c = with_device_defaults(cpu);
  EXPECT_EQ(c.max_num_seqs, 8);
  EXPECT_EQ(c.max_num_batched_tokens, 128);
  EXPECT_EQ(c.prefill_chunk_size, 128);
  EXPECT_EQ(c.kv_cache_bytes, int64_t{1} << 30);
  EngineConfig gpu;
  gpu.device = "cuda";
  gpu.max_num_batched_tokens = 4096;
  const EngineConfig g = with_device_defaults(gpu);
  EXPECT_EQ(g.max_num_seqs, 256);
  EXPECT_EQ(g.max_num_batched_tokens, 4096);
  EXPECT_EQ(g.prefill_chunk_size, 2048);
  EXPECT_EQ(g.kv_cache_bytes, 0);  // sized later from the device's free memory
}

}  // namespace
}  // namespace rlt::server

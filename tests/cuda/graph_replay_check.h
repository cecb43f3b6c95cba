// A CUDA attention backend declared cuda_graph_safe: one captured call replays correctly after the
// lengths and page tables in device memory change (the launches depend on shapes only), and
// bit-identical to the same call run eagerly. Shared by the CUDA backends' tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "attention/backend.h"
#include "cuda/runtime.h"
#include "paged_test_data.h"

namespace rlt::attention::testing {

inline void check_graph_replay_reads_device_metadata(AttentionBackend& backend) {
  std::mt19937 rng(3);
  const int32_t d = 128, kvh = 2, q_heads = 4, bs = 16, blocks = 64, width = 16, rows = 3;
  PagedPools pools(DType::kBF16, blocks, bs, kvh, d, rng);
  const std::vector<int32_t> lengths_a = {10, 200, 77}, lengths_b = {250, 1, 130};
  const std::vector<int32_t> tables_a = random_tables(lengths_a, bs, blocks, width, 0, rng);
  const std::vector<int32_t> tables_b = random_tables(lengths_b, bs, blocks, width, 0, rng);
  std::vector<float> q(static_cast<size_t>(rows * q_heads * d));
  std::normal_distribution<float> dist;
  for (float& x : q) x = dist(rng);

  const size_t pool_bytes = pools.kh.size() * sizeof(uint16_t), qo_bytes = q.size() * sizeof(float);
  auto dk = cuda::DeviceAllocation::allocate(pool_bytes, "K");
  auto dv = cuda::DeviceAllocation::allocate(pool_bytes, "V");
  auto dq = cuda::DeviceAllocation::allocate(qo_bytes, "q");
  auto dout = cuda::DeviceAllocation::allocate(qo_bytes, "out");
  auto dtables = cuda::DeviceAllocation::allocate(tables_a.size() * sizeof(int32_t), "tables");
  auto dlengths = cuda::DeviceAllocation::allocate(rows * sizeof(int32_t), "lengths");
  ASSERT_TRUE(dk.ok() && dv.ok() && dq.ok() && dout.ok() && dtables.ok() && dlengths.ok());
  ASSERT_EQ(cudaMemcpy(dk->data(), pools.kh.data(), pool_bytes, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv->data(), pools.vh.data(), pool_bytes, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq->data(), q.data(), qo_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  auto stream = cuda::Stream::create();
  ASSERT_TRUE(stream.ok());

  AttentionParams p;
  p.q = static_cast<const float*>(dq->data());
  p.out = static_cast<float*>(dout->data());
  p.rows = p.num_seqs = rows;
  p.num_q_heads = q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.k.base = dk->data();
  p.v.base = dv->data();
  p.block_tables = static_cast<const int32_t*>(dtables->data());
  p.context_lengths = static_cast<const int32_t*>(dlengths->data());
  p.table_width = width;
  p.stream = stream->handle();
  auto set_metadata = [&](const std::vector<int32_t>& tables, const std::vector<int32_t>& lengths) {
    p.host_block_tables = tables.data();
    p.host_context_lengths = lengths.data();
    ASSERT_EQ(cudaMemcpyAsync(dtables->data(), tables.data(), tables.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream->handle()),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dlengths->data(), lengths.data(), lengths.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream->handle()),
              cudaSuccess);
  };
  auto download = [&] {
    std::vector<float> out(q.size());
    EXPECT_EQ(cudaStreamSynchronize(stream->handle()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), dout->data(), qo_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  };
  // Eager results (the first call also sizes the scratch, as the runner's warm-up does).
  set_metadata(tables_a, lengths_a);
  ASSERT_TRUE(run_attention(backend, p).ok());
  const std::vector<float> eager_a = download();
  set_metadata(tables_b, lengths_b);
  ASSERT_TRUE(run_attention(backend, p).ok());
  const std::vector<float> eager_b = download();

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream->handle(), cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  const Status captured = run_attention(backend, p);
  ASSERT_EQ(cudaStreamEndCapture(stream->handle(), &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  set_metadata(tables_a, lengths_a);
  ASSERT_EQ(cudaGraphLaunch(exec, stream->handle()), cudaSuccess);
  EXPECT_EQ(download(), eager_a);
  set_metadata(tables_b, lengths_b);
  ASSERT_EQ(cudaGraphLaunch(exec, stream->handle()), cudaSuccess);
  EXPECT_EQ(download(), eager_b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace rlt::attention::testing

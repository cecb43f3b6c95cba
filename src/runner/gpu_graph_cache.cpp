#include "runner/gpu_graph_cache.h"

#include <fmt/format.h>

#include "common/log.h"
#include "cuda/device.h"
#include "runner/cuda_check.h"

namespace rlt::runner {
struct GpuGraphCache::Graph {
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

GpuGraphCache::GpuGraphCache(CudaGraphs mode, int64_t max_graph_rows,
                             std::function<void()> release_captures)
    : mode_(mode),
      max_graph_rows_(max_graph_rows),
      release_captures_(std::move(release_captures)) {}

GpuGraphCache::~GpuGraphCache() = default;

bool GpuGraphCache::enabled_for(int64_t rows) const {
  return mode_ != CudaGraphs::kOff && !disabled_ &&
         (rows <= max_graph_rows_ || mode_ == CudaGraphs::kOn);
}

void GpuGraphCache::clear() {
  graphs_.clear();
  if (release_captures_) release_captures_();
}

Status GpuGraphCache::find_or_capture(Key key, bool enabled, cudaStream_t stream,
                                      const std::function<Status()>& pass) {
  if (enabled) {
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      RLT_RETURN_IF_ERROR(
          cuda_check(cudaGraphLaunch(it->second->exec, stream), "replaying a recurrent graph"));
      ++replays_;
      return {};
    }
  }
  RLT_RETURN_IF_ERROR(pass());
  if (!enabled) return {};
  // Warmed up by the eager pass above: capture this bucket for the next steps.
  cudaGraph_t graph = nullptr;
  auto captured = std::make_unique<Graph>();
  Status s = cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                        "starting capture");
  if (s.ok()) {
    Status ran = pass();
    s = cuda_check(cudaStreamEndCapture(stream, &graph), "ending capture");
    if (s.ok()) s = ran;
  }
  if (s.ok())
    s = cuda_check(cudaGraphInstantiate(&captured->exec, graph, 0),
                   "instantiating a recurrent graph");
  if (graph) cudaGraphDestroy(graph);
  if (s.ok()) {
    graphs_.emplace(key, std::move(captured));
    return {};
  }
  if (mode_ == CudaGraphs::kOn) return s.with_context("CUDA graphs were required (--cuda-graphs)");
  (void)cudaGetLastError();
  disabled_ = true;
  clear();  // no graph replays from now on: none needs the backend's buffers
  log_warn(
      fmt::format("CUDA graph capture failed, running eagerly from now on: {}", s.to_string()));
  return {};
}

}  // namespace rlt::runner

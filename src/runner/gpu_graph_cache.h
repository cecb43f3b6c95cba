// The GPU runner's CUDA graphs of the recurrent pass: one per bucket (rows, page-table width),
// each captured after one eager run of its bucket has warmed every buffer, then replayed. Mode
// kAuto falls back to eager execution for good if a capture fails (with a warning); kOn makes a
// failed capture an error; kOff never captures. CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::runner {

class GpuGraphCache {
 public:
  using Key = std::pair<int64_t, int32_t>;  // rows bucket, table-width bucket
  // `release_captures` runs whenever every graph is dropped (buffers kept alive for captured
  // graphs, such as the attention backend's, may go then).
  GpuGraphCache(CudaGraphs mode, int64_t max_graph_rows, std::function<void()> release_captures);
  ~GpuGraphCache();

  // Whether a recurrent batch of `rows` rows runs through a graph (kOn: every size; kAuto: up to
  // max_graph_rows, larger batches being launch-efficient already).
  bool enabled_for(int64_t rows) const;
  // Runs `pass` on `stream` for bucket `key`: replays the bucket's graph, or runs the pass
  // eagerly and, when graphs are enabled for it, captures it for the next time.
  Status find_or_capture(Key key, bool enabled, cudaStream_t stream,
                         const std::function<Status()>& pass);
  // Drops every graph (a buffer they point at moved); they are captured again on next use.
  void clear();
  int64_t replays() const { return replays_; }

 private:
  struct Graph;
  CudaGraphs mode_;
  int64_t max_graph_rows_;
  std::function<void()> release_captures_;
  bool disabled_ = false;  // kAuto after a failed capture
  std::map<Key, std::unique_ptr<Graph>> graphs_;
  int64_t replays_ = 0;
};

}  // namespace rlt::runner

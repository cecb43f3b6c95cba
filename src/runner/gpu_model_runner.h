// Executes batches on a CUDA GPU (stages as in runner/model_input.h): GpuCore over KV pools
// in device memory (cuda::CudaKVStorage) with a CUDA attention backend. The host plans each pass
// (attention metadata, K/V write slots), uploads it through pinned memory in one copy, and the
// per-request hidden states stay on the device between stages. One stream orders everything, so
// submit() only enqueues: a batch's results (gate logits, logits or greedy tokens) land in a pinned
// result slot that collect() reads after waiting for the batch's event. Plans go up through a ring
// of pinned staging buffers, so planning the next batch never waits for the previous one.
//
// CUDA graphs: a RECURRENT batch (one loop of the core: state gather, every layer, the gate, state
// scatter) runs as a graph captured per bucket — batch size rounded up to a power of two, page
// table width rounded up to a power of two. Padding rows read and write the storage's padding
// block and a padding state slot. The plan of each step is uploaded into the same fixed device
// buffer the graphs read, and validated on the host before every replay. A bucket runs eagerly
// the first time (warming every buffer), then is captured. Mode kAuto falls back to eager
// execution if capture fails (with a warning); kOn makes that an error; kOff never captures.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "attention/backend.h"
#include "attention/capabilities.h"
#include "attention/metadata_planner.h"
#include "cuda/cuda_kv_storage.h"
#include "cuda/sampling.h"
#include "runner/device_choice.h"
#include "runner/gpu_device_sampler.h"
#include "runner/gpu_graph_cache.h"
#include "runner/gpu_model.h"
#include "runner/gpu_state_slots.h"
#include "runner/gpu_upload_ring.h"
#include "runner/model_runner.h"
#include "runner/stage_driver.h"
#include "sampling/device_rows.h"

namespace rlt::runner {

using CudaGraphMode = rlt::CudaGraphs;

class GpuModelRunner final : public ModelRunner {
 public:
  // Creates the stream, uploads the model, allocates the KV pools with `geometry` (plus the
  // padding block) on `device`. settings.programmatic_launch turns on programmatic dependent
  // launch for the runner's stream (cuda/programmatic_launch.h); devices below sm_90 refuse it.
  static Result<std::unique_ptr<GpuModelRunner>> create(
      std::shared_ptr<const model::OuroModel> model, const kv::KVGeometry& geometry, int device,
      std::unique_ptr<attention::AttentionBackend> backend,
      const attention::BackendCapabilities& caps, const GpuRunnerSettings& settings);
  ~GpuModelRunner() override;

  Status submit(const ModelInput& input) override;
  Status collect(uint64_t seq, BatchResult* out) override;
  kv::KVStorage& storage() override { return *storage_; }
  void release(kv::RequestId id) override;
  size_t weight_bytes() const { return core_->weight_bytes(); }
  // Recurrent batches replayed from a captured graph.
  int64_t graph_replays() const override { return graphs_->replays(); }
  int64_t device_sampled_batches() const override { return device_sampled_batches_; }
  DeviceStageTimes device_stage_times() const override { return stage_times_; }

 private:
  class Attention;
  GpuModelRunner() = default;

  // A submitted batch: what collect() finds in its result slot.
  struct Ticket {
    uint64_t seq = 0;
    Stage stage = Stage::kPrefill;
    int64_t rows = 0;
    bool device_sampled = false, device_logprobs = false;
    size_t slot = 0;
  };

  // Enqueues `input`'s work; what comes back to the host goes to `results` (CODA batches note in
  // `ticket` how they were sampled).
  Status enqueue(const ModelInput& input, cuda::PinnedBuffer& results, Ticket& ticket);
  Status enqueue_coda(const ModelInput& input, cuda::PinnedBuffer& results, Ticket& ticket);
  // Enqueues the recurrent pass; the gate logits go to `results`.
  Status enqueue_recurrent(const PassInput& pass, cuda::PinnedBuffer& results);
  class Stages;  // the stage driver's steps on the device (gpu_model_runner.cpp)
  // The recurrent pass itself (gather, one loop, gate, scatter) over `rows` bound rows.
  Status recurrent_pass(int64_t rows, const int32_t* slots);
  // Drops every captured graph (a buffer they point at moved).
  void invalidate_graphs();

  Result<int32_t> slot(kv::RequestId id);
  // Uploads and embeds a pass's tokens into h_.
  Status stage_rows(std::span<const int32_t> tokens);
  // Saves the hidden row of every pass row that ends its prompt into its request's slot.
  Status keep_prompt_states(const PassInput& pass);
  Status ensure_rows(int64_t rows);
  // Device buffers of a CODA batch of `rows` rows: logits, and with device sampling its results
  // and its largest scratch (top-p, penalties and logprobs all asked for).
  Status ensure_sampling(int64_t rows);
  // Grows `buffer` to `bytes` (after the queued work that may read it).
  Status grow_buffer(cuda::DeviceAllocation& buffer, size_t bytes, const char* what);
  // Copies host int32 arrays to the device in one transfer; returns their device addresses.
  Status upload(std::initializer_list<std::span<const int32_t>> arrays,
                std::vector<const int32_t*>& device);
  Status synchronize();

  std::shared_ptr<const model::OuroModel> model_;
  int device_ = 0;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<GpuCore> core_;
  std::unique_ptr<cuda::CudaKVStorage> storage_;
  std::unique_ptr<Attention> attention_;
  std::unique_ptr<GpuStateSlots> states_;  // per-request hidden states, one device row each
  // Per-batch device buffers and host staging.
  int64_t row_capacity_ = 0;
  cuda::DeviceAllocation h_, gates_;       // [rows, hidden], [rows]
  cuda::DeviceAllocation logits_;          // [coda rows, vocab]
  GpuDeviceSampler sampler_;               // samples CODA batches on the device
  std::unique_ptr<GpuUploadRing> uploads_;  // plan uploads through pinned staging
  // Submitted, uncollected batches and the pinned slots their results land in (one more slot than
  // batches in flight, so that collect()'s logits stay readable until the next collect()).
  struct ResultSlot {
    cuda::PinnedBuffer host;
    cuda::Event start, done;  // timing events around the batch's device work
  };
  // Adds a collected batch's device time to its stage's total.
  void add_stage_time(Stage stage, const ResultSlot& slot);
  // Records the submitted batch's start event if it is not yet recorded (at its first upload).
  Status start_device_span();
  const cuda::Event* unstarted_ = nullptr;
  std::array<ResultSlot, kMaxInFlight + 1> results_;
  size_t next_result_ = 0;
  std::deque<Ticket> tickets_;
  std::vector<int32_t> slots_;
  sampling::DeviceSampleRows sample_rows_;  // a CODA batch's device sampling inputs
  std::unique_ptr<GpuGraphCache> graphs_;   // the recurrent pass's CUDA graphs
  bool device_sampling_ = true;
  int64_t device_sampled_batches_ = 0;
  DeviceStageTimes stage_times_;
};

}  // namespace rlt::runner

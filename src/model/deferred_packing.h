// Packing deferred to the engine's spare time (LoadOptions::defer_packing): the kernels compute
// from the checkpoint's rows (PackOptions::rows_in_place) with the packed kernels' results bit for
// bit, so a first start answers at once; the engine then packs one step (the lm head or one layer)
// between its batches and when idle, never in the middle of a forward pass, until the packed
// kernels' speed is reached. Each step's source pages go back once it is packed, so the weights
// stay resident once; the packed-weight cache, when asked for, is written after the last step.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/packed_matrix.h"
#include "model/packed_cache.h"
#include "rlt/status.h"

namespace rlt::model {

class DeferredPacking {
 public:
  struct Step {
    std::vector<const kernels::PackedMatrix*> matrices;
    std::vector<std::string> sources;  // the checkpoint tensors they are packed from
  };

  // `release` gives a source tensor back once its step is packed, `done` the rest of the sources
  // once every step is. The matrices and whatever the callbacks touch must outlive this object.
  // `cache`: written once every step is done, from `slots` (the same matrices).
  DeferredPacking(std::vector<Step> steps, std::function<void(const std::string&)> release,
                  std::function<void()> done, std::optional<PackedCacheKey> cache,
                  std::vector<PackedSlot> slots);
  // With a cache to write, packs what is left and waits for the write (a first start leaves a
  // cache behind, as when packing at load); without one, drops what is left.
  ~DeferredPacking();
  DeferredPacking(const DeferredPacking&) = delete;
  DeferredPacking& operator=(const DeferredPacking&) = delete;

  // False once every step is packed, or when packing failed (no memory for a buffer: the
  // matrices left compute from the checkpoint, slower and still exact; logged).
  bool pending() const { return next_ < steps_.size() && !failed_; }
  // Packs the next step on the calling thread (its panels across the OpenMP threads) and gives
  // its sources back; after the last one, starts the cache write on a thread of its own. Not to
  // be called while a forward pass runs on other threads (it would compete for their cores).
  void pack_next();
  // Packs everything left and waits for the cache write: its outcome (ok without a cache).
  Status finish();

 private:
  std::vector<Step> steps_;
  size_t next_ = 0;
  std::function<void(const std::string&)> release_;
  std::function<void()> done_;
  bool failed_ = false;
  std::optional<PackedCacheKey> cache_;
  std::vector<PackedSlot> slots_;
  std::unique_ptr<BackgroundCacheWrite> cache_write_;
  double seconds_ = 0;
};

}  // namespace rlt::model

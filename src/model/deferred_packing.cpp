#include "model/deferred_packing.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <new>

#include "common/log.h"

namespace rlt::model {

DeferredPacking::DeferredPacking(std::vector<Step> steps,
                                 std::function<void(const std::string&)> release,
                                 std::function<void()> done, std::optional<PackedCacheKey> cache,
                                 std::vector<PackedSlot> slots)
    : steps_(std::move(steps)),
      release_(std::move(release)),
      done_(std::move(done)),
      cache_(std::move(cache)),
      slots_(std::move(slots)) {}

DeferredPacking::~DeferredPacking() {
  if (!cache_) return;
  try {
    (void)finish();
  } catch (const std::exception& e) {  // a thread that cannot start: the next start packs again
    log_warn(fmt::format("packed-weight cache not written: {}", e.what()));
  }
}

void DeferredPacking::pack_next() {
  if (!pending()) return;
  const auto start = std::chrono::steady_clock::now();
  const Step& step = steps_[next_];
  try {
    for (const kernels::PackedMatrix* m : step.matrices) m->complete_packing();
  } catch (const std::bad_alloc&) {
    failed_ = true;
    log_warn(
        "no memory to pack the weights: the matrices not packed yet keep computing from the "
        "checkpoint (same results, slower); no packed-weight cache is written");
    return;
  }
  ++next_;
  for (const std::string& name : step.sources) release_(name);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (pending()) return;
  done_();
  log_info(fmt::format("weights packed between steps: {:.2f} s in all", seconds_));
  if (cache_) cache_write_ = std::make_unique<BackgroundCacheWrite>(*cache_, slots_);
}

Status DeferredPacking::finish() {
  while (pending()) pack_next();
  return cache_write_ ? cache_write_->wait() : Status::ok_status();
}

}  // namespace rlt::model

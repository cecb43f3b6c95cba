// The packed-weight cache (docs/loading.md): the linear layers' packed matrices written to one
// file, so that a later start maps them instead of packing again. The CLI's default
// (`--packed-cache auto`); it costs a second copy of the weights on disk, bounded per folder.
//
// A cache file is never trusted as found. Its name comes from what should not change for one
// model (the source's path, the load options, the CPU's kernels); its header records what may
// (every source file's size, modification time and inode, the rlt binary, the layout version).
// A file is used only when that record equals this run's, the header's own checksum holds,
// every matrix's descriptor is consistent and has the shape the model expects, and every
// matrix's bytes hash to what was written. Anything else is reported and the cache rebuilt.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mapped_file.h"
#include "kernels/cpu/packed_matrix.h"
#include "rlt/status.h"

namespace rlt::model {

// One packed matrix of a model, by name ("lm_head", "layers.3.qkv", ...), with the shape the
// model's config gives it (checked against a cache file's).
struct PackedSlot {
  std::string name;
  kernels::PackedMatrix* matrix = nullptr;
  int64_t outputs = 0;
  int64_t cols = 0;
  kernels::PackedMatrix::Epilogue epilogue = kernels::PackedMatrix::Epilogue::kStore;
};

// Where the cache of one model lives and what its header must record.
struct PackedCacheKey {
  std::string path;      // <dir>/<model name>-<hash of the stable part>.rltpack
  std::string identity;  // JSON text: the stable and the changing part
};

// The key for a source (`source_path`: the folder or GGUF file; `files`: every file the weights
// and config come from) packed with `options` (JSON text of the load options that change the
// packed bytes). The current CPU's kernels and the running binary are added here.
Result<PackedCacheKey> packed_cache_key(const std::string& cache_dir,
                                        const std::string& source_path,
                                        const std::vector<std::string>& files,
                                        const std::string& options);

// Fills every slot's matrix from the cache file, views over its mapping. An error says why the
// file cannot be used (missing, stale, corrupt); the slots are then untouched.
Status read_packed_cache(const PackedCacheKey& key, const std::vector<PackedSlot>& slots);

// Writes the slots' matrices (a temporary file renamed into place, so a reader never sees half a
// cache). Refused when the file system would be left with less than 1 GiB free; afterwards the
// folder's least recently used cache files are deleted while they take more than
// kPackedCacheBudgetBytes together (this one is kept).
Status write_packed_cache(const PackedCacheKey& key, const std::vector<PackedSlot>& slots);
inline constexpr int64_t kPackedCacheBudgetBytes = int64_t{32} << 30;

// A cache write on a thread of its own, so that the first start does not wait for the disk. The
// matrices must outlive it: its destructor waits for the write to end.
class BackgroundCacheWrite {
 public:
  BackgroundCacheWrite(PackedCacheKey key, std::vector<PackedSlot> slots);
  ~BackgroundCacheWrite();
  BackgroundCacheWrite(const BackgroundCacheWrite&) = delete;
  BackgroundCacheWrite& operator=(const BackgroundCacheWrite&) = delete;
  // Waits for the write; its outcome.
  Status wait();

 private:
  Status result_;  // before the thread, which writes it
  std::thread thread_;
};

}  // namespace rlt::model

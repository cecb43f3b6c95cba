// Owners for CUDA runtime objects: streams, events, device allocations, pinned host staging and
// a device pool that carves one reservation so steady-state steps never call cudaMalloc. No CUDA
// header here (handles are the runtime's opaque struct pointers), so host code stays light.
// Every operation that can fail returns Status naming what it was doing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/offset_allocator.h"
#include "common/status.h"

struct CUstream_st;
struct CUevent_st;

namespace rlt::cuda {

using StreamHandle = CUstream_st*;

// Makes `device` current for the calling thread.
Status set_device(int device);
// Device-to-device copy bandwidth of the current device over `bytes` (best of 5, counted as read +
// write), in GB/s; 0 when the buffers cannot be allocated.
double copy_bandwidth_gbs(size_t bytes);

// Waits for everything queued on `stream` (null: the legacy default stream).
Status synchronize_stream(StreamHandle stream, const std::string& what);

// A non-blocking stream (it does not synchronize with the legacy default stream).
class Stream {
 public:
  static Result<Stream> create();
  Stream() = default;
  Stream(Stream&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();

  StreamHandle handle() const { return handle_; }
  Status synchronize() const;

 private:
  explicit Stream(StreamHandle h) : handle_(h) {}
  StreamHandle handle_ = nullptr;
};

class Event {
 public:
  // `timing` false makes record/wait cheaper; true allows elapsed_ms.
  static Result<Event> create(bool timing);
  Event() = default;
  Event(Event&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Event& operator=(Event&& other) noexcept;
  ~Event();

  Status record(StreamHandle stream) const;
  Status synchronize() const;
  // Makes `stream` wait for this event without blocking the host.
  Status wait_on(StreamHandle stream) const;
  // Milliseconds between two recorded timing events.
  static Result<float> elapsed_ms(const Event& start, const Event& end);

 private:
  CUevent_st* handle_ = nullptr;
};

// One cudaMalloc'd range, freed on destruction.
class DeviceAllocation {
 public:
  // `what` names the buffer in the out-of-memory message.
  static Result<DeviceAllocation> allocate(size_t bytes, const std::string& what);
  DeviceAllocation() = default;
  DeviceAllocation(DeviceAllocation&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  ~DeviceAllocation();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory for asynchronous copies; grows on demand (never inside a timed step:
// callers size it up front).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  // At least `bytes` of capacity; keeps the buffer when it is already large enough. The old
  // contents are not kept when it grows.
  Status reserve(size_t bytes);
  std::byte* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

class DevicePool;

// A range of a DevicePool, returned to it on destruction. The pool must outlive it.
class PoolBlock {
 public:
  PoolBlock() = default;
  PoolBlock(PoolBlock&& other) noexcept { *this = std::move(other); }
  PoolBlock& operator=(PoolBlock&& other) noexcept;
  ~PoolBlock();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  friend class DevicePool;
  DevicePool* pool_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  uint64_t offset_ = 0;
};

// One device reservation carved into aligned blocks (best fit, merged on release): the buffers a
// runner needs per step come from here, so no step calls cudaMalloc or cudaFree.
class DevicePool {
 public:
  static Result<std::unique_ptr<DevicePool>> create(size_t bytes);

  // Errors: the pool has no free range that fits (resource_exhausted, with the pool's state).
  Result<PoolBlock> allocate(size_t bytes, const std::string& what, size_t alignment = 256);
  size_t capacity() const { return static_cast<size_t>(allocator_.capacity()); }
  size_t used() const { return static_cast<size_t>(allocator_.used()); }

 private:
  friend class PoolBlock;
  explicit DevicePool(DeviceAllocation slab);
  void release(uint64_t offset);

  DeviceAllocation slab_;
  OffsetAllocator allocator_;
};

// A device buffer that grows (from a pool) when a larger shape arrives; callers size it before
// graph capture so captured steps never allocate.
class GrowableBuffer {
 public:
  Status ensure(DevicePool& pool, size_t bytes, const std::string& what);
  void* data() const { return block_.data(); }
  size_t bytes() const { return block_.bytes(); }

 private:
  PoolBlock block_;
};

}  // namespace rlt::cuda

// Owners for CUDA runtime objects: streams, events, device allocations and pinned host staging.
// Device buffers follow one policy everywhere: allocated once at their first size and only ever
// grown (never per step), so steady-state steps do not call cudaMalloc. No CUDA header here
// (handles are the runtime's opaque struct pointers), so host code stays light. Every operation
// that can fail returns Status naming what it was doing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rlt/status.h"

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

// Whether `stream` is being captured into a CUDA graph (work queued on it then runs only when the
// graph is launched); `who` names the caller in the error.
Result<bool> stream_is_capturing(StreamHandle stream, const std::string& who);

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

}  // namespace rlt::cuda

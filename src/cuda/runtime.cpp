#include "cuda/runtime.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "cuda/device.h"
#include "cuda/programmatic_launch.h"

namespace rlt::cuda {
namespace {

Status check(cudaError_t e, const std::string& what) {
  return cuda_status(static_cast<int>(e), what);
}

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

Status set_device(int device) {
  return check(cudaSetDevice(device), fmt::format("selecting CUDA device {}", device));
}

double copy_bandwidth_gbs(size_t bytes) {
  auto a = DeviceAllocation::allocate(bytes, "copy probe"),
       b = DeviceAllocation::allocate(bytes, "copy probe");
  auto start = Event::create(true), stop = Event::create(true);
  if (!a.ok() || !b.ok() || !start.ok() || !stop.ok()) return 0.0;
  // A copy that fails to queue would time as ~0 ms: an absurd roofline.
  if (cudaMemset(a->data(), 1, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0.0;
  }
  float best = 1e30f;
  for (int i = 0; i < 5; ++i) {
    (void)start->record(nullptr);
    if (cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, nullptr) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return 0.0;
    }
    (void)stop->record(nullptr);
    if (!stop->synchronize().ok()) return 0.0;
    auto ms = Event::elapsed_ms(*start, *stop);
    if (ms.ok()) best = std::min(best, *ms);
  }
  if (best >= 1e30f) return 0.0;  // no pass could be timed
  return 2.0 * static_cast<double>(bytes) / (best * 1e-3) / 1e9;
}

Status synchronize_stream(StreamHandle stream, const std::string& what) {
  return check(cudaStreamSynchronize(stream), what);
}

Result<bool> stream_is_capturing(StreamHandle stream, const std::string& who) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RLT_RETURN_IF_ERROR(check(cudaStreamIsCapturing(stream, &capture),
                            who + ": asking whether the stream is capturing"));
  return capture != cudaStreamCaptureStatusNone;
}

Result<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  RLT_RETURN_IF_ERROR(
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a CUDA stream"));
  return Stream(s);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

Stream::~Stream() {
  if (!handle_) return;
  set_programmatic_launch(handle_, false);  // a later stream may get the same handle
  cudaStreamDestroy(handle_);
}

Status Stream::synchronize() const {
  return synchronize_stream(handle_, "synchronizing a CUDA stream");
}

Result<Event> Event::create(bool timing) {
  Event e;
  RLT_RETURN_IF_ERROR(check(
      cudaEventCreateWithFlags(&e.handle_, timing ? cudaEventDefault : cudaEventDisableTiming),
      "creating a CUDA event"));
  return e;
}

Event& Event::operator=(Event&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(handle_);
}

Status Event::record(StreamHandle stream) const {
  return check(cudaEventRecord(handle_, stream), "recording a CUDA event");
}
Status Event::synchronize() const {
  return check(cudaEventSynchronize(handle_), "waiting for a CUDA event");
}

Result<float> Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  RLT_RETURN_IF_ERROR(
      check(cudaEventElapsedTime(&ms, start.handle_, end.handle_), "timing between CUDA events"));
  return ms;
}

Result<DeviceAllocation> DeviceAllocation::allocate(size_t bytes, const std::string& what) {
  DeviceAllocation a;
  if (bytes == 0) return a;
  const cudaError_t e = cudaMalloc(&a.data_, bytes);
  // Any other failure is an earlier error resurfacing (a faulted kernel), not a size problem.
  if (e != cudaSuccess && e != cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clears it unless it is sticky (then every later call reports it)
    return check(e, fmt::format("allocating {} of device memory for {}", mib(bytes), what));
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; clear it for later calls
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return resource_exhausted(
        fmt::format("cannot allocate {} of device memory for {}: {} ({} free of {}); "
                    "reduce the KV cache size or the batch size",
                    mib(bytes), what, cudaGetErrorString(e), mib(free_bytes), mib(total)));
  }
  a.bytes_ = bytes;
  return a;
}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

DeviceAllocation::~DeviceAllocation() {
  if (data_) cudaFree(data_);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

Status PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return {};
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return resource_exhausted(fmt::format("cannot allocate {} of pinned host memory: {}",
                                          mib(bytes), cudaGetErrorString(e)));
  }
  data_ = static_cast<std::byte*>(p);
  capacity_ = bytes;
  return {};
}

}  // namespace rlt::cuda

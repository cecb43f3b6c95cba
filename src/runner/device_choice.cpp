#include "runner/device_choice.h"

#include <fmt/format.h>

#include <charconv>

#include "kernels/cpu/memory_probe.h"

#ifdef RLT_RUNNER_HAS_CUDA
#include "cuda/device.h"
#include "cuda/runtime.h"
#include "runner/gpu_model_runner.h"
#endif

namespace rlt::runner {

Result<DeviceChoice> choose_device(const std::string& text) {
  DeviceChoice choice;
  if (text == "cpu") {
    choice.attention_device = attention::detect_host_cpu();
    return choice;
  }
  int index = 0;
  if (text != "cuda") {
    const std::string prefix = "cuda:";
    const char* end = text.data() + text.size();
    if (text.rfind(prefix, 0) != 0 ||
        std::from_chars(text.data() + prefix.size(), end, index).ptr != end ||
        text.size() == prefix.size() || index < 0) {
      return invalid_argument(
          fmt::format("--device '{}': expected cpu, cuda or cuda:N (N a device index)", text));
    }
  }
#ifdef RLT_RUNNER_HAS_CUDA
  const cuda::DeviceList list = cuda::list_devices();
  if (list.devices.empty()) {
    return failed_precondition(fmt::format(
        "--device {}: no usable CUDA device ({}); use --device cpu", text, list.why_none));
  }
  if (index >= static_cast<int>(list.devices.size())) {
    return invalid_argument(
        fmt::format("--device {}: this machine has {} CUDA device(s), numbered from 0", text,
                    list.devices.size()));
  }
  const cuda::DeviceInfo& d = list.devices[static_cast<size_t>(index)];
  choice.cuda = true;
  choice.cuda_index = index;
  choice.attention_device.kind = attention::DeviceKind::kCuda;
  choice.attention_device.sm = d.compute_major * 10 + d.compute_minor;
  return choice;
#else
  return failed_precondition(
      fmt::format("--device {}: this build has no CUDA; rebuild with the CUDA toolkit "
                  "(cmake -DRLT_CUDA=ON) or use --device cpu",
                  text));
#endif
}

double copy_bandwidth_gbs(const std::string& device) {
  if (device == "cpu") return kernels::copy_bandwidth_gbs();
#ifdef RLT_RUNNER_HAS_CUDA
  auto choice = choose_device(device);
  if (!choice.ok() || !cuda::set_device(choice->cuda_index).ok()) return 0.0;
  return cuda::copy_bandwidth_gbs(size_t{1} << 30);
#else
  return 0.0;
#endif
}

Result<GpuMemoryInfo> gpu_memory_info(int device) {
#ifdef RLT_RUNNER_HAS_CUDA
  RLT_RETURN_IF_ERROR(cuda::set_device(device));
  RLT_ASSIGN_OR_RETURN(cuda::MemoryInfo m, cuda::memory_info());
  return GpuMemoryInfo{m.free, m.total};
#else
  return failed_precondition(
      fmt::format("cuda:{}: this build has no CUDA (cmake -DRLT_CUDA=ON)", device));
#endif
}

Result<std::unique_ptr<ModelRunner>> make_gpu_runner(
    std::shared_ptr<const model::OuroModel> model, const kv::KVGeometry& geometry, int device,
    std::unique_ptr<attention::AttentionBackend> backend,
    const attention::BackendCapabilities& caps, const GpuRunnerSettings& settings) {
#ifdef RLT_RUNNER_HAS_CUDA
  RLT_ASSIGN_OR_RETURN(auto runner, GpuModelRunner::create(std::move(model), geometry, device,
                                                           std::move(backend), caps, settings));
  return std::unique_ptr<ModelRunner>(std::move(runner));
#else
  (void)model, (void)geometry, (void)device, (void)backend, (void)caps, (void)settings;
  return failed_precondition("this build has no CUDA: the GPU runner is not compiled in");
#endif
}

}  // namespace rlt::runner

// The names of include/rlt/config.h's enums: one table per enum, read both ways.
#include <fmt/format.h>

#include <array>
#include <utility>

#include "rlt/config.h"

namespace rlt {
namespace {

template <typename E, size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

template <typename E, size_t N>
Result<E> parse(const Names<E, N>& names, std::string_view text, std::string_view what) {
  std::string accepted;
  for (const auto& [value, n] : names) {
    if (n == text) return value;
    if (!accepted.empty()) accepted += ", ";
    accepted += n;
  }
  return invalid_argument(fmt::format("unknown {} '{}' (accepted: {})", what, text, accepted));
}

template <typename E, size_t N>
std::string_view lookup(const Names<E, N>& names, E value) {
  for (const auto& [v, n] : names)
    if (v == value) return n;
  return "unknown";
}

constexpr Names<KVLayout, 2> kKVLayouts{
    {{KVLayout::kLastExited, "last_exited"}, {KVLayout::kShared, "shared"}}};
constexpr Names<KVDType, 5> kKVDTypes{{{KVDType::kAuto, "auto"},
                                       {KVDType::kF32, "f32"},
                                       {KVDType::kBF16, "bf16"},
                                       {KVDType::kF16, "f16"},
                                       {KVDType::kQ8_0, "q8_0"}}};
constexpr Names<WeightDType, 4> kWeightDTypes{{{WeightDType::kAuto, "auto"},
                                                {WeightDType::kBF16, "bf16"},
                                                {WeightDType::kF32, "f32"},
                                                {WeightDType::kF16, "f16"}}};
constexpr Names<QuantizeType, 4> kQuantizeTypes{{{QuantizeType::kNone, "none"},
                                                  {QuantizeType::kQ8_0, "q8_0"},
                                                  {QuantizeType::kQ4_K, "q4_k"},
                                                  {QuantizeType::kQ6_K, "q6_k"}}};
constexpr Names<ActivationDType, 3> kActivationDTypes{{{ActivationDType::kF32, "f32"},
                                                       {ActivationDType::kBF16, "bf16"},
                                                       {ActivationDType::kInt8, "int8"}}};
constexpr Names<BatchMode, 2> kBatchModes{
    {{BatchMode::kRefill, "refill"}, {BatchMode::kNoRefill, "no_refill"}}};
constexpr Names<QueuePolicy, 2> kQueuePolicies{
    {{QueuePolicy::kFcfs, "fcfs"}, {QueuePolicy::kPriority, "priority"}}};
constexpr Names<ExitPolicy, 3> kExitPolicies{{{ExitPolicy::kOuro, "ouro"},
                                              {ExitPolicy::kOuroDelayed, "ouro_delayed"},
                                              {ExitPolicy::kTrace, "trace"}}};
constexpr Names<ExitCriterion, 7> kExitCriteria{{{ExitCriterion::kGate, "gate"},
                                                 {ExitCriterion::kNone, "none"},
                                                 {ExitCriterion::kLatentDiff, "latent-diff"},
                                                 {ExitCriterion::kEntropyDiff, "entropy-diff"},
                                                 {ExitCriterion::kKl, "kl"},
                                                 {ExitCriterion::kMinpKl, "minp-kl"},
                                                 {ExitCriterion::kArgmaxStability, "argmax-stability"}}};
constexpr Names<CudaGraphs, 3> kCudaGraphs{
    {{CudaGraphs::kAuto, "auto"}, {CudaGraphs::kOn, "on"}, {CudaGraphs::kOff, "off"}}};
constexpr Names<SpeculativeMethod, 3> kSpeculativeMethods{{{SpeculativeMethod::kOff, "off"},
                                                           {SpeculativeMethod::kNgram, "ngram"},
                                                           {SpeculativeMethod::kSelf, "self"}}};

}  // namespace

Result<KVLayout> parse_kv_layout(std::string_view n) {
  return parse(kKVLayouts, n, "kv layout");
}
Result<KVDType> parse_kv_dtype(std::string_view n) {
  return parse(kKVDTypes, n, "kv dtype");
}
Result<WeightDType> parse_weight_dtype(std::string_view n) {
  return parse(kWeightDTypes, n, "weight dtype");
}
Result<QuantizeType> parse_quantize_type(std::string_view n) {
  return parse(kQuantizeTypes, n, "quantization type");
}
Result<ActivationDType> parse_activation_dtype(std::string_view n) {
  return parse(kActivationDTypes, n, "activation dtype");
}
Result<BatchMode> parse_batch_mode(std::string_view n) {
  return parse(kBatchModes, n, "batch mode");
}
Result<QueuePolicy> parse_queue_policy(std::string_view n) {
  return parse(kQueuePolicies, n, "queue policy");
}
Result<ExitPolicy> parse_exit_policy(std::string_view n) {
  return parse(kExitPolicies, n, "exit policy");
}
Result<ExitCriterion> parse_exit_criterion(std::string_view n) {
  return parse(kExitCriteria, n, "exit criterion");
}
Result<CudaGraphs> parse_cuda_graphs(std::string_view n) {
  return parse(kCudaGraphs, n, "CUDA graph mode");
}

Result<SpeculativeMethod> parse_speculative_method(std::string_view n) {
  return parse(kSpeculativeMethods, n, "speculative method");
}

std::string_view name(KVLayout v) {
  return lookup(kKVLayouts, v);
}
std::string_view name(KVDType v) {
  return lookup(kKVDTypes, v);
}
std::string_view name(WeightDType v) {
  return lookup(kWeightDTypes, v);
}
std::string_view name(QuantizeType v) {
  return lookup(kQuantizeTypes, v);
}
std::string_view name(ActivationDType v) {
  return lookup(kActivationDTypes, v);
}
std::string_view name(BatchMode v) {
  return lookup(kBatchModes, v);
}
std::string_view name(QueuePolicy v) {
  return lookup(kQueuePolicies, v);
}
std::string_view name(ExitCriterion v) {
  return lookup(kExitCriteria, v);
}
std::string_view name(ExitPolicy v) {
  return lookup(kExitPolicies, v);
}
std::string_view name(CudaGraphs v) {
  return lookup(kCudaGraphs, v);
}
std::string_view name(SpeculativeMethod v) {
  return lookup(kSpeculativeMethods, v);
}

Status SpeculativeConfig::validate() const {
  if (num_tokens < 1 || num_tokens > kMaxTokens) {
    return invalid_argument(fmt::format("--num-speculative-tokens must be in [1, {}], got {}", kMaxTokens, num_tokens));
  }
  if (draft_loops < 0) return invalid_argument(fmt::format("--draft-loops must be >= 0, got {}", draft_loops));
  if (!(forced_acceptance >= 0.0 && forced_acceptance <= 1.0)) {
    return invalid_argument(
        fmt::format("--speculative-forced-acceptance must be in [0, 1] (0 = off), got {}", forced_acceptance));
  }
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
    return invalid_argument(fmt::format("the n-gram sizes must satisfy 1 <= min <= max <= 64, got min {} and max {}",
                                        ngram_min, ngram_max));
  }
  return {};
}

}  // namespace rlt

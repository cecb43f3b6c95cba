// Device sampling (sampling.h): up to six kernels and, for top-p rows, CUB's segmented radix sort.
//   logprobs one 1024-thread block per row asking for logprobs: the raw row's log normalizer
//            (max + log of the double sum of exp(x - max)) and its most likely ids, one
//            block-wide selection of the next (value, id) key per id.
//   penalty  one 256-thread block per row with penalties: copies the row, then applies the
//            repetition penalty to every listed id, then frequency and presence (the host's
//            f32 operations, rounded as the host rounds them; ids are distinct within a list).
//   prepare  one 1024-thread block per row: checks the row and finds its maximum (the host's
//            argmax rules), greedy rows end here; the shifted, tempered values (f32, as the host),
//            top-k by a 4-pass radix select of the k-th largest value, and for top-p rows the sort
//            keys (the host's descending (value, id) key) and the normalizer.
//   sort     the top-p rows' keys, each row a segment (other rows are empty segments).
//   top_p    one warp per top-p row walks the sorted keys with the host's cumulative sum
//            (exp(x) / total, in descending order) to the first key past top_p.
//   pick     one 1024-thread block per row: min-p, the weights exp(x) (double), their running sum
//            in ascending id order (contiguous chunks per thread, chunk totals scanned in a fixed
//            order) and the first id whose running sum exceeds uniform * total.
//   sampled  one thread per row asking for logprobs: the sampled token's raw logprob.
// Every reduction has a fixed order, so results never depend on scheduling.
#include <cuda_runtime.h>

#include <cfloat>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda/device.h"
#include "cuda/sampling.h"

namespace rlt::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kPosInf = __builtin_huge_valf();
constexpr uint64_t kNoCut = ~uint64_t{0};

struct RowState {
  int32_t live = 0;    // valid and not greedy: pick still has to run
  int32_t finite = 0;  // top-p rows: values that survived top-k
  double top_p_total = 0.0;
  uint64_t cut_key = kNoCut;  // top-p: keys greater than this are removed
};

__device__ __forceinline__ uint32_t orderable(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float from_orderable(uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

// The host sampler's descending_key: ascending key order is descending value, then ascending id.
__device__ __forceinline__ uint64_t descending_key(float value, int32_t id) {
  if (value == 0.0f) value = 0.0f;
  return (static_cast<uint64_t>(~orderable(value)) << 32) | static_cast<uint32_t>(id);
}

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

struct Layout {
  size_t work = 0, states = 0, penalized = 0, log_normalizer = 0, keys_in = 0, keys_out = 0,
         begin = 0, end = 0, temp = 0, temp_bytes = 0, total = 0;
};

Layout layout(int64_t rows, int64_t vocab, bool any_top_p, bool any_penalties, bool any_logprobs) {
  Layout l;
  size_t at = 0;
  l.work = at;
  at += align256(static_cast<size_t>(rows * vocab) * sizeof(float));
  l.states = at;
  at += align256(static_cast<size_t>(rows) * sizeof(RowState));
  if (any_penalties) {
    l.penalized = at;
    at += align256(static_cast<size_t>(rows * vocab) * sizeof(float));
  }
  if (any_logprobs) {
    l.log_normalizer = at;
    at += align256(static_cast<size_t>(rows) * sizeof(double));
  }
  if (any_top_p &&
      rows * vocab <= kMaxDeviceSampleElements) {  // larger calls are refused by sample_rows
    const size_t keys = align256(static_cast<size_t>(rows * vocab) * sizeof(uint64_t));
    l.keys_in = at;
    at += keys;
    l.keys_out = at;
    at += keys;
    l.begin = at;
    at += align256(static_cast<size_t>(rows) * sizeof(int32_t));
    l.end = at;
    at += align256(static_cast<size_t>(rows) * sizeof(int32_t));
    size_t temp = 0;
    cub::DeviceSegmentedRadixSort::SortKeys(
        nullptr, temp, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
        static_cast<int>(rows * vocab), static_cast<int>(rows), static_cast<int32_t*>(nullptr),
        static_cast<int32_t*>(nullptr), 0, 64);
    l.temp = at;
    l.temp_bytes = temp;
    at += align256(temp);
  }
  l.total = at;
  return l;
}

__device__ __forceinline__ bool has_penalties(const DeviceSampleParams& p) {
  return p.repetition != 1.0f || p.frequency != 0.0f || p.presence != 0.0f;
}

__device__ __forceinline__ float clamp_finite(float x) {
  return fminf(fmaxf(x, -FLT_MAX), FLT_MAX);
}

constexpr int kPenaltyThreads = 256;

// Penalized copies of the rows with penalties. Non-finite values stay as they are: -inf is a mask
// the host leaves alone, and NaN / +inf make the row invalid, which prepare reports from the copy.
__global__ void __launch_bounds__(kPenaltyThreads)
    penalty_kernel(const float* logits, int64_t vocab, const DeviceSampleParams* params,
                   const int32_t* ids, const int32_t* counts, float* penalized) {
  const int64_t r = blockIdx.x;
  const DeviceSampleParams p = params[r];
  if (!has_penalties(p)) return;  // uniform over the block
  const float* row = logits + r * vocab;
  float* out = penalized + r * vocab;
  for (int64_t i = threadIdx.x; i < vocab; i += kPenaltyThreads) out[i] = row[i];
  __syncthreads();  // a listed id may be any element
  if (p.repetition != 1.0f) {
    for (int32_t j = p.repeated_begin + threadIdx.x; j < p.repeated_end; j += kPenaltyThreads) {
      float& x = out[ids[j]];
      if (!isfinite(x)) continue;
      x = clamp_finite(x > 0.0f ? __fdiv_rn(x, p.repetition) : __fmul_rn(x, p.repetition));
    }
  }
  __syncthreads();  // an id may be in both lists
  if (p.frequency != 0.0f || p.presence != 0.0f) {
    for (int32_t j = p.generated_begin + threadIdx.x; j < p.generated_end; j += kPenaltyThreads) {
      float& x = out[ids[j]];
      if (!isfinite(x)) continue;
      const float frequency = __fmul_rn(p.frequency, static_cast<float>(counts[j]));
      x = clamp_finite(__fsub_rn(__fsub_rn(x, frequency), p.presence));
    }
  }
}

// The block's values combined by `op` in a fixed tree (every thread calls it and gets the result);
// `scratch` holds kThreads values and may be reused as soon as it returns.
template <typename T, typename Op>
__device__ T block_tree_reduce(T* scratch, T value, Op op) {
  const int tid = threadIdx.x;
  scratch[tid] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) scratch[tid] = op(scratch[tid], scratch[tid + stride]);
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();
  return result;
}

// The raw row's log normalizer and top logprobs, as the host's fill_raw_logprobs (its maximum in
// f32, exp(x - max) summed in double, log_softmax = x - (max + log(sum)) cast to f32).
__global__ void __launch_bounds__(kThreads)
    logprobs_kernel(const float* logits, int64_t vocab, const DeviceSampleParams* params,
                    double* log_normalizer, DeviceLogprobs* out) {
  __shared__ float s_max[kThreads];
  __shared__ double s_sum[kThreads];
  __shared__ uint64_t s_key[kThreads];
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const DeviceSampleParams p = params[r];
  if (p.logprobs < 0) {  // uniform over the block
    if (tid == 0) out[r].count = 0;
    return;
  }
  const float* row = logits + r * vocab;
  float max = kNegInf;
  for (int64_t i = tid; i < vocab; i += kThreads) max = fmaxf(max, row[i]);  // NaN ignored
  max = block_tree_reduce(s_max, max, [](float a, float b) { return fmaxf(a, b); });
  double sum = 0.0;
  for (int64_t i = tid; i < vocab; i += kThreads)
    sum += exp(static_cast<double>(row[i]) - static_cast<double>(max));
  sum = block_tree_reduce(s_sum, sum, [](double a, double b) { return a + b; });
  const double normalizer = static_cast<double>(max) + log(sum);
  const int n = min(static_cast<int64_t>(min(p.logprobs, kMaxDeviceLogprobs)), vocab);
  // The j-th most likely id is the smallest key above the (j-1)-th: one selection per id.
  uint64_t previous = 0;
  for (int j = 0; j < n; ++j) {
    uint64_t best = kNoCut;
    for (int64_t i = tid; i < vocab; i += kThreads) {
      const uint64_t key = descending_key(row[i], static_cast<int32_t>(i));
      if ((j == 0 || key > previous) && key < best) best = key;
    }
    previous = block_tree_reduce(s_key, best, [](uint64_t a, uint64_t b) { return min(a, b); });
    if (tid == 0) {
      const auto id = static_cast<int32_t>(static_cast<uint32_t>(previous));
      out[r].ids[j] = id;
      out[r].values[j] = static_cast<float>(static_cast<double>(row[id]) - normalizer);
    }
  }
  if (tid == 0) {
    out[r].count = n;
    log_normalizer[r] = normalizer;
  }
}

// The sampled token's raw logprob (after pick), for rows asking for logprobs.
__global__ void sampled_logprob_kernel(const float* logits, int64_t rows, int64_t vocab,
                                       const DeviceSampleParams* params,
                                       const double* log_normalizer, const int32_t* result,
                                       DeviceLogprobs* out) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows || params[r].logprobs < 0) return;
  const int32_t token = result[3 * r];
  out[r].logprob =
      static_cast<float>(static_cast<double>(logits[r * vocab + token]) - log_normalizer[r]);
}

__global__ void __launch_bounds__(kThreads)
    prepare_kernel(const float* logits, const float* penalized, int64_t vocab,
                   const DeviceSampleParams* params, bool any_top_p, float* work, uint64_t* keys,
                   int32_t* begin, int32_t* end, RowState* states, int32_t* result,
                   float* bad_value) {
  __shared__ float s_value[kThreads];
  __shared__ int32_t s_index[kThreads], s_bad[kThreads], s_finite[kThreads];
  __shared__ double s_sum[kThreads];
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_prefix, s_remaining;
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const DeviceSampleParams p = params[r];
  // The host checks the raw row and penalizes a copy; the copy keeps every non-finite value, so
  // checking it finds the same problems.
  const float* row = (penalized != nullptr && has_penalties(p) ? penalized : logits) + r * vocab;
  float* w = work + r * vocab;
  const bool top_p = any_top_p && p.temperature != 0.0f && p.top_p < 1.0;
  if (any_top_p && tid == 0) {
    begin[r] = static_cast<int32_t>(r * vocab);
    end[r] =
        static_cast<int32_t>(r * vocab);  // an empty segment unless the row is sampled with top-p
  }

  // The row's checks and its argmax (first index among ties), as the host.
  float best = kNegInf;
  int32_t best_index = INT32_MAX, bad = INT32_MAX, finite = 0;
  for (int64_t i = tid; i < vocab; i += kThreads) {
    const float x = row[i];
    if (isnan(x) || x == kPosInf) {
      bad = min(bad, static_cast<int32_t>(i));
      continue;
    }
    finite |= isfinite(x) ? 1 : 0;
    if (x > best || (x == best && i < best_index)) {
      best = x;
      best_index = static_cast<int32_t>(i);
    }
  }
  s_value[tid] = best;
  s_index[tid] = best_index;
  s_bad[tid] = bad;
  s_finite[tid] = finite;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const float v = s_value[tid + stride];
      const int32_t j = s_index[tid + stride];
      if (v > s_value[tid] || (v == s_value[tid] && j < s_index[tid])) {
        s_value[tid] = v;
        s_index[tid] = j;
      }
      s_bad[tid] = min(s_bad[tid], s_bad[tid + stride]);
      s_finite[tid] |= s_finite[tid + stride];
    }
    __syncthreads();
  }
  const bool valid = s_bad[0] == INT32_MAX && s_finite[0] != 0;
  const bool greedy = p.temperature == 0.0f;
  if (tid == 0) {
    result[3 * r] = s_index[0] == INT32_MAX ? 0 : s_index[0];
    result[3 * r + 1] = s_bad[0] == INT32_MAX ? -1 : s_bad[0];
    result[3 * r + 2] = s_finite[0];
    bad_value[r] = s_bad[0] == INT32_MAX ? 0.0f : row[s_bad[0]];
    states[r].live = valid && !greedy ? 1 : 0;
    states[r].cut_key = kNoCut;
  }
  // Every thread has read s_bad[0] and s_finite[0] before the top-p sums reuse s_finite.
  __syncthreads();
  if (!valid || greedy) return;  // uniform over the block

  // Shift by the maximum, then divide by the temperature (f32, as the host).
  const float max = s_value[0];
  for (int64_t i = tid; i < vocab; i += kThreads) {
    const float x = row[i];
    w[i] = x == kNegInf ? kNegInf : (x - max) / p.temperature;
  }

  // Top-k: every value >= the k-th largest survives (ties kept). Each thread reads back only the
  // elements it wrote itself.
  if (p.top_k > 0 && p.top_k < vocab) {
    uint32_t prefix = 0, mask = 0;
    if (tid == 0) s_remaining = static_cast<uint32_t>(p.top_k);
    for (int shift = 24; shift >= 0; shift -= 8) {
      if (tid < 256) hist[tid] = 0;
      __syncthreads();
      for (int64_t i = tid; i < vocab; i += kThreads) {
        const uint32_t u = orderable(w[i]);
        if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 0xffu], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        uint32_t remaining = s_remaining;
        int digit = 255;
        for (; digit > 0; --digit) {
          if (hist[digit] >= remaining) break;
          remaining -= hist[digit];
        }
        s_remaining = remaining;
        s_prefix = prefix | (static_cast<uint32_t>(digit) << shift);
      }
      __syncthreads();
      prefix = s_prefix;
      mask |= 0xffu << shift;
    }
    const float threshold = from_orderable(prefix);
    for (int64_t i = tid; i < vocab; i += kThreads) {
      if (w[i] < threshold) w[i] = kNegInf;
    }
  }
  if (!top_p) return;

  // Top-p: the survivors' sort keys and normalizer.
  if (tid == 0) end[r] = static_cast<int32_t>(r * vocab + vocab);
  double sum = 0.0;
  int32_t count = 0;
  uint64_t* row_keys = keys + r * vocab;
  for (int64_t i = tid; i < vocab; i += kThreads) {
    const float x = w[i];
    if (x == kNegInf) {
      row_keys[i] = kNoCut;  // sorts last; the walk stops before it
      continue;
    }
    row_keys[i] = descending_key(x, static_cast<int32_t>(i));
    sum += exp(static_cast<double>(x));
    ++count;
  }
  s_sum[tid] = sum;
  s_finite[tid] = count;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      s_sum[tid] += s_sum[tid + stride];
      s_finite[tid] += s_finite[tid + stride];
    }
    __syncthreads();
  }
  if (tid == 0) {
    states[r].top_p_total = s_sum[0];
    states[r].finite = s_finite[0];
  }
}

// One warp per row: the host's cumulative walk over the sorted survivors. The lanes compute 32
// terms exp(x) / total at a time; lane 0 adds them in sorted order, exactly as the host does.
__global__ void top_p_kernel(int64_t vocab, const DeviceSampleParams* params, const float* work,
                             const uint64_t* sorted, RowState* states) {
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  RowState& st = states[r];
  const DeviceSampleParams p = params[r];
  if (!st.live || !(p.top_p < 1.0)) return;  // uniform over the warp
  const float* w = work + r * vocab;
  const uint64_t* keys = sorted + r * vocab;
  const int32_t finite = st.finite;
  const double total = st.top_p_total;
  double cumulative = 0.0;
  for (int32_t base = 0; base < finite; base += 32) {
    const int32_t j = base + lane;
    const double term =
        j < finite ? exp(static_cast<double>(w[static_cast<uint32_t>(keys[j])])) / total : 0.0;
    int32_t hit = -1;
    for (int k = 0; k < 32 && base + k < finite; ++k) {
      const double t = __shfl_sync(0xffffffffu, term, k);
      if (lane == 0 && hit < 0) {
        cumulative += t;
        if (cumulative > p.top_p) hit = base + k;
      }
    }
    hit = __shfl_sync(0xffffffffu, hit, 0);
    if (hit >= 0) {
      if (lane == 0 && hit + 1 < finite) st.cut_key = keys[hit];
      return;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    pick_kernel(int64_t vocab, const DeviceSampleParams* params, const float* work,
                const RowState* states, int32_t* result) {
  __shared__ double s_offset[kThreads];
  __shared__ int32_t s_first[kThreads], s_last[kThreads];
  __shared__ double s_total;
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const RowState st = states[r];
  if (!st.live) return;  // uniform over the block
  const DeviceSampleParams p = params[r];
  const float* w = work + r * vocab;
  const bool cut = p.top_p < 1.0 && st.cut_key != kNoCut;
  // The weight of id i after top-p and min-p (0 when removed).
  auto weight = [&](int64_t i) {
    float x = w[i];
    if (x == kNegInf) return 0.0;
    if (cut && descending_key(x, static_cast<int32_t>(i)) > st.cut_key) return 0.0;
    if (static_cast<double>(x) < p.log_min_p) return 0.0;
    return exp(static_cast<double>(x));
  };
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t first = tid * chunk, last = min(vocab, first + chunk);
  double local = 0.0;
  int32_t last_nonzero = -1;
  for (int64_t i = first; i < last; ++i) {
    const double x = weight(i);
    if (x == 0.0) continue;
    local += x;
    last_nonzero = static_cast<int32_t>(i);
  }
  s_offset[tid] = local;
  s_last[tid] = last_nonzero;
  __syncthreads();
  if (tid == 0) {
    // Chunk totals to exclusive offsets, in id order.
    double running = 0.0;
    for (int t = 0; t < kThreads; ++t) {
      const double x = s_offset[t];
      s_offset[t] = running;
      running += x;
    }
    s_total = running;
  }
  __syncthreads();
  const double target = p.uniform * s_total;
  double running = s_offset[tid];
  int32_t found = INT32_MAX;
  for (int64_t i = first; i < last; ++i) {
    const double x = weight(i);
    if (x == 0.0) continue;
    running += x;
    if (running > target) {
      found = static_cast<int32_t>(i);
      break;
    }
  }
  s_first[tid] = found;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      s_first[tid] = min(s_first[tid], s_first[tid + stride]);
      s_last[tid] = max(s_last[tid], s_last[tid + stride]);
    }
    __syncthreads();
  }
  // No crossing (u * total rounded up to the total): the last id with weight, as the host.
  if (tid == 0) result[3 * r] = s_first[0] != INT32_MAX ? s_first[0] : s_last[0];
}

}  // namespace

size_t sampling_scratch_bytes(int64_t rows, int64_t vocab, bool any_top_p, bool any_penalties,
                              bool any_logprobs) {
  return layout(rows, vocab, any_top_p, any_penalties, any_logprobs).total;
}

Status sample_rows(const SampleBatch& b, CUstream_st* stream) {
  const int64_t rows = b.rows, vocab = b.vocab;
  if (rows <= 0) return {};
  if (rows * vocab > kMaxDeviceSampleElements) {
    return invalid_argument(
        "device sampling: rows x vocab exceeds 2^31 elements; sample fewer rows at once");
  }
  if ((b.any_penalties && (b.history_ids == nullptr || b.history_counts == nullptr)) ||
      (b.any_logprobs && b.logprobs == nullptr)) {
    return invalid_argument(
        "device sampling: penalties need the history lists, logprobs an output");
  }
  const Layout l = layout(rows, vocab, b.any_top_p, b.any_penalties, b.any_logprobs);
  auto* base = static_cast<std::byte*>(b.scratch);
  auto* work = reinterpret_cast<float*>(base + l.work);
  auto* states = reinterpret_cast<RowState*>(base + l.states);
  auto* penalized = b.any_penalties ? reinterpret_cast<float*>(base + l.penalized) : nullptr;
  auto* log_normalizer =
      b.any_logprobs ? reinterpret_cast<double*>(base + l.log_normalizer) : nullptr;
  auto* keys_in = b.any_top_p ? reinterpret_cast<uint64_t*>(base + l.keys_in) : nullptr;
  auto* keys_out = b.any_top_p ? reinterpret_cast<uint64_t*>(base + l.keys_out) : nullptr;
  auto* begin = b.any_top_p ? reinterpret_cast<int32_t*>(base + l.begin) : nullptr;
  auto* end = b.any_top_p ? reinterpret_cast<int32_t*>(base + l.end) : nullptr;
  const auto grid = static_cast<unsigned>(rows);
  auto launched = [](const char* what) {
    return cuda_status(static_cast<int>(cudaGetLastError()), what);
  };
  // <<<>>> launches report through the runtime's last error: start from a clean one, so that an
  // earlier, already reported error is not blamed on sampling. (Sticky errors persist anyway.)
  (void)cudaGetLastError();
  if (b.any_logprobs) {
    logprobs_kernel<<<grid, kThreads, 0, stream>>>(b.logits, vocab, b.params, log_normalizer,
                                                   b.logprobs);
    RLT_RETURN_IF_ERROR(launched("device sampling (logprobs)"));
  }
  if (b.any_penalties) {
    penalty_kernel<<<grid, kPenaltyThreads, 0, stream>>>(b.logits, vocab, b.params, b.history_ids,
                                                         b.history_counts, penalized);
    RLT_RETURN_IF_ERROR(launched("device sampling (penalties)"));
  }
  prepare_kernel<<<grid, kThreads, 0, stream>>>(b.logits, penalized, vocab, b.params, b.any_top_p,
                                                work, keys_in, begin, end, states, b.result,
                                                b.bad_value);
  RLT_RETURN_IF_ERROR(launched("device sampling (prepare)"));
  if (b.any_top_p) {
    size_t temp_bytes = l.temp_bytes;
    const cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
        base + l.temp, temp_bytes, keys_in, keys_out, static_cast<int>(rows * vocab),
        static_cast<int>(rows), begin, end, 0, 64, stream);
    RLT_RETURN_IF_ERROR(cuda_status(static_cast<int>(e), "device sampling (top-p sort)"));
    top_p_kernel<<<grid, 32, 0, stream>>>(vocab, b.params, work, keys_out, states);
    RLT_RETURN_IF_ERROR(launched("device sampling (top-p)"));
  }
  pick_kernel<<<grid, kThreads, 0, stream>>>(vocab, b.params, work, states, b.result);
  RLT_RETURN_IF_ERROR(launched("device sampling (pick)"));
  if (b.any_logprobs) {
    sampled_logprob_kernel<<<static_cast<unsigned>((rows + 127) / 128), 128, 0, stream>>>(
        b.logits, rows, vocab, b.params, log_normalizer, b.result, b.logprobs);
    RLT_RETURN_IF_ERROR(launched("device sampling (sampled logprob)"));
  }
  return {};
}

}  // namespace rlt::cuda

// The quantized kernel against same-run references, at Ouro-1.4B and SmolLM2-135M shapes:
//   GEMV (one token, decode): quantized bytes streamed per second vs the copy bandwidth, with the
//     bf16 kernel on the same shape beside it;
//   GEMM (prefill rows): GFLOP/s vs the bf16 kernel on the same shape.
// Each quantized type runs with f32 activations and, where the CPU has the kernel, int8 ones
// (`--activation-dtype int8`; label "<type>/i8").
// Weights are random GGML blocks (quant::random_blocks), packed as the engine packs them.
//   GEMV from L2 (one thread): the decoding ceiling, what the arithmetic alone allows.
//   Small batches (--small): the time of m = 1..16 rows against one row, from memory: what a
//     decode step of m requests, or a speculative verification of m - 1 drafts, costs (one layer
//     of each model, and SmolLM2's lm head).
// Usage: rlt_bench_quant_linear [--quick] [--only LABEL] [--ceiling] [--small] (LABEL as printed:
// bf16, Q4_K, Q4_K/i8, ...; --ceiling runs only the from-L2 section, --small only the small
// batches)
#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bandwidth_probe.h"
#include "common/half.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "quant/random_blocks.h"

namespace {

using namespace rlt;
using quant::GgmlType;

struct Shape {
  const char* name;
  int64_t out, in;
};

// A GGML type (bf16 when unset) and the activations it runs with.
struct Kind {
  std::optional<GgmlType> type;
  bool int8 = false;
};

// One packed matrix of a kind.
kernels::PackedMatrix make(const Kind& kind, const Shape& s, uint32_t seed) {
  const std::optional<GgmlType> type = kind.type;
  if (!type) {
    std::vector<uint16_t> w(static_cast<size_t>(s.out * s.in));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (auto& v : w) v = f32_to_bf16(u(rng));
    return kernels::PackedMatrix::pack({DType::kBF16, s.out, s.in, w.data()});
  }
  const int64_t blocks =
      s.out * s.in / quant::ggml_type_info(static_cast<uint32_t>(*type))->block_elems;
  const std::vector<uint8_t> bytes = quant::random_blocks(*type, blocks, seed);
  return kernels::PackedMatrix::pack({DType::kF32, s.out, s.in, bytes.data(), type},
                                     {.int8_activations = kind.int8});
}

std::string label(const Kind& kind) {
  if (!kind.type) return "bf16";
  return std::string(quant::ggml_type_name(*kind.type)) + (kind.int8 ? "/i8" : "");
}

// In --quick runs: bf16, Q8_0 and Q4_K only.
bool quick_kind(const Kind& k) {
  return !k.type || *k.type == GgmlType::kQ4_K || *k.type == GgmlType::kQ8_0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  bool ceiling_only = false, small_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--small") == 0) small_only = true;
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    if (std::strcmp(argv[i], "--ceiling") == 0) ceiling_only = true;
  }
  auto skip = [&](const Kind& k) {
    if (!only.empty()) return k.type && label(k) != only;  // bf16 stays: the ratios' reference
    return quick && !quick_kind(k);
  };
  // A K-quant row is whole blocks of 256: no file holds one 576 wide (llama.cpp writes SmolLM2's
  // in Q5_0 / Q8_0), so those shapes skip it.
  auto fits = [](const Kind& k, int64_t in) {
    return !k.type || in % quant::ggml_type_info(static_cast<uint32_t>(*k.type))->block_elems == 0;
  };
  const int reps = quick ? 3 : 7;
  fmt::print("threads: {}, kernels: {}, int8 kernel: {}\n", omp_get_max_threads(),
             kernels::cpu_dispatch_target(), kernels::linear_quant_int8_kernel());
  const double copy = bench::copy_bandwidth_gbs();
  fmt::print("copy bandwidth (read+write): {:.1f} GB/s\n\n", copy);
  std::vector<Kind> kinds = {{}};
  // Q4_K_M / Q5_K_M files of models with rows a K-quant block does not divide (SmolLM2's 576)
  // hold mostly Q5_0 and Q5_1 (llama.cpp's fallback), so those are measured too.
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                     GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    kinds.push_back({t, false});
    if (kernels::linear_quant_int8_supported()) kinds.push_back({t, true});
  }
  const Shape shapes[] = {
      {"ouro q/k/v/o 2048x2048", 2048, 2048}, {"ouro gate/up 5632x2048", 5632, 2048},
      {"ouro down 2048x5632", 2048, 5632},    {"ouro lm_head 49152x2048", 49152, 2048},
      {"smollm2 qkv 960x576", 960, 576},      {"smollm2 gate_up 3072x576", 3072, 576},
      {"smollm2 down 576x1536", 576, 1536},   {"smollm2 lm_head 49152x576", 49152, 576}};
  if (small_only) {
    // Every matrix of one SmolLM2 layer and one Ouro-1.4B layer, enough distinct layers that
    // none is served from cache: a decode step's linear layers, at m rows; and SmolLM2's lm head
    // (a speculative verification's rows all pass through it).
    const std::vector<std::vector<Shape>> layers = {
        {shapes[4], shapes[5], shapes[6], {"smollm2 o", 576, 576}},
        {shapes[0], shapes[1], shapes[2]},
        {shapes[7]}};
    const char* names[] = {"smollm2-135m layer", "ouro-1.4b layer", "smollm2-135m head"};
    fmt::print("{:<20} {:<6} {}\n", "small batches", "type",
               "time of m rows / time of 1 row, m = 1..16");
    for (size_t l = 0; l < layers.size(); ++l) {
      for (const auto& kind : kinds) {
        bool all_fit = true;
        for (const Shape& s : layers[l]) all_fit &= fits(kind, s.in);
        if (skip(kind) || !all_fit) continue;
        std::vector<kernels::PackedMatrix> ws;
        int64_t bytes = 0;
        for (uint32_t copy = 0; bytes < (int64_t{192} << 20); ++copy) {
          for (const Shape& s : layers[l]) {
            ws.push_back(make(kind, s, 100 + copy * 7 + static_cast<uint32_t>(ws.size())));
            bytes += ws.back().bytes();
          }
        }
        std::vector<float> x(16 * 5632, 0.5f), y(16 * 49152);  // widest input, widest output
        std::string line;
        double one = 0;
        for (int64_t m = 1; m <= 16; ++m) {
          const double secs = bench::best_seconds(reps, [&] {
            for (const auto& w : ws) kernels::linear(x.data(), m, w, y.data());
          });
          if (m == 1) one = secs;
          line += fmt::format(" {:.2f}", secs / one);
        }
        fmt::print("{:<20} {:<6}{}\n", names[l], label(kind), line);
      }
    }
    return 0;
  }
  // Decode streams every weight once per token: each timed pass walks enough distinct copies
  // (>= 256 MiB in all) that none is served from cache; each pass is judged against a copy probe
  // taken right before it (median of adjacent ratios).
  fmt::print("{:<28} {:<6} {:>10} {:>10} {:>12}\n", "GEMV (1 row, from memory)", "type", "GB/s",
             "of copy", "weights/ns");
  for (const Shape& s : shapes) {
    if (ceiling_only) break;
    for (const auto& kind : kinds) {
      if (skip(kind) || !fits(kind, s.in)) continue;
      const kernels::PackedMatrix first = make(kind, s, 1);
      const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / first.bytes() + 1);
      std::vector<kernels::PackedMatrix> ws;
      ws.push_back(first);
      for (int64_t i = 1; i < copies; ++i)
        ws.push_back(make(kind, s, static_cast<uint32_t>(i + 1)));
      std::vector<float> x(static_cast<size_t>(s.in), 0.5f), y(static_cast<size_t>(s.out));
      const auto bytes = static_cast<double>(copies * first.bytes());
      const bench::VersusCopy r = bench::median_versus_copy(reps, bytes, [&] {
        for (const auto& w : ws) kernels::linear(x.data(), 1, w, y.data());
      });
      const double weights_per_ns =
          r.gbs / (static_cast<double>(first.bytes()) / static_cast<double>(s.out * s.in));
      fmt::print("{:<28} {:<6} {:>10.1f} {:>9.0f}% {:>12.2f}\n", s.name, label(kind), r.gbs,
                 100.0 * r.ratio, weights_per_ns);
    }
  }
  // The decoding ceiling: one thread on a matrix its L2 holds (128 x 2048: at most 280 KiB), so
  // the rate is what the kernel's arithmetic allows. A type whose ceiling is not well above the
  // per-thread share of the copy bandwidth is bound by decoding, not by memory.
  fmt::print("\n{:<28} {:<6} {:>10} {:>10}\n", "GEMV (1 row, from L2)", "type", "weights/ns",
             "GB/s");
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (const auto& kind : kinds) {
    if (skip(kind)) continue;
    const Shape s{"", 128, 2048};
    const kernels::PackedMatrix w = make(kind, s, 3);
    std::vector<float> x(static_cast<size_t>(s.in), 0.5f), y(static_cast<size_t>(s.out));
    constexpr int kPasses = 200;
    const double secs = bench::best_seconds(reps * 3, [&] {
      for (int i = 0; i < kPasses; ++i) kernels::linear(x.data(), 1, w, y.data());
    });
    fmt::print("{:<28} {:<6} {:>10.2f} {:>10.1f}\n", "128x2048, 1 thread", label(kind),
               kPasses * static_cast<double>(s.out * s.in) / secs / 1e9,
               kPasses * static_cast<double>(w.bytes()) / secs / 1e9);
  }
  omp_set_num_threads(threads);
  if (ceiling_only) return 0;
  fmt::print("\n{:<28} {:<6} {:>10} {:>10}\n", "GEMM", "type", "GFLOP/s", "of bf16");
  for (int64_t m : {16, 128, 512}) {
    for (const Shape& s : {shapes[0], shapes[1], shapes[5]}) {
      double bf16 = 0;
      for (const auto& kind : kinds) {
        if (skip(kind) || !fits(kind, s.in)) continue;
        const kernels::PackedMatrix w = make(kind, s, 7);
        std::vector<float> x(static_cast<size_t>(m * s.in), 0.5f),
            y(static_cast<size_t>(m * s.out));
        const double secs =
            bench::best_seconds(reps, [&] { kernels::linear(x.data(), m, w, y.data()); });
        const double gf = 2.0 * static_cast<double>(m * s.out * s.in) / secs / 1e9;
        if (!kind.type) bf16 = gf;
        fmt::print("{:<28} {:<6} {:>10.1f} {:>9.0f}%\n", fmt::format("m={} {}", m, s.name),
                   label(kind), gf, 100.0 * gf / bf16);
      }
    }
  }
  return 0;
}

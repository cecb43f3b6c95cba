// How far ahead the kernels that stream weight panels (linear.cpp, linear_bf16.cpp,
// linear_quant.cpp, linear_quant_int8.cpp) ask for the lines they will read. A panel is one
// forward stream; asking ahead keeps more misses in flight than the hardware prefetcher alone.
// Prefetching past the end of a matrix is harmless. cpu_flash (attention/) asks for short K/V
// token rows kL2AheadBytes ahead as well.
#pragma once

#include <cstdint>

namespace rlt::kernels {

// Into L1, this many bytes ahead of the bytes being computed on (the int8 decode pass asks 1 KiB
// ahead instead: see linear_quant_int8.cpp).
inline constexpr int64_t kPrefetchBytes = 2048;

// The quantized kernels ask for each line twice: into L2 this many bytes beyond the L1 prefetch,
// then into L1. An L1 prefetch holds one of the core's few fill buffers until its line arrives, so
// fetched from L3 or memory they capped the stream (Ouro-shape Q4_K int8 decode 7.5 tokens/s, the
// GEMV at 75-79 % of the copy bandwidth); from L2 they return at once, and the L2 prefetches queue
// deeper (8.4 tokens/s, 81-86 %; 8 KiB and 16 KiB measured alike).
inline constexpr int64_t kL2AheadBytes = 8192;

}  // namespace rlt::kernels

// A two-kernel probe of programmatic dependent launch: a producer that lets its dependent launch
// at once, then spins before writing a value, and a consumer launched through cuda/launch.cuh that
// notes when it started and then reads the value. C++17, no CUDA headers.
#pragma once

#include <cstdint>

#include "rlt/status.h"

struct CUstream_st;

namespace rlt::cuda::testing {

struct PdlProbe {
  int32_t value_seen = 0;               // 42 unless the consumer read before the producer wrote
  bool consumer_started_first = false;  // the consumer began before the producer finished
};

// Runs the probe on `stream` (its programmatic-launch setting decides how the consumer launches)
// and waits for it.
Result<PdlProbe> run_pdl_probe(CUstream_st* stream);

}  // namespace rlt::cuda::testing

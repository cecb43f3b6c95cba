// Huginn's initial recurrent state, drawn from a counter-based stream so that a request's seed
// reproduces it whatever batch the token runs in (the official code draws it from torch's global
// generator, which no batch order can reproduce). tools/reference_huginn.py's `seeded_state` is
// the same stream in Python: the oracle replays the engine's draws exactly.
//
// Element i of the state of the token at `position`, attempt a = 0, 1, ...:
//   base  = mix64(seed + φ·(position + 1)),  φ = 0x9E3779B97F4A7C15 (mod 2^64)
//   u1    = ((mix64(base + φ·(2n + 1)) >> 11) + 1)·2^-53  in (0, 1],   n = 16·i + a
//   u2    =  (mix64(base + φ·(2n + 2)) >> 11)·2^-53       in [0, 1)
//   z     = sqrt(-2 ln u1)·cos(2π u2)                       (Box–Muller, double)
// the first attempt with |z| <= 3 gives state[i] = f32(z·std) (a normal cut at ±3 std; 16
// rejections in a row, probability 1e-41, give 0).
#pragma once

#include <cstdint>
#include <span>

namespace rlt::model {

void draw_initial_state(uint64_t seed, int64_t position, double std, std::span<float> out);

}  // namespace rlt::model

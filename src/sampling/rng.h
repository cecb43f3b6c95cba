// The per-request random stream: Philox4x32-10 (Salmon et al., SC'11; Random123) used as a
// counter-based generator, so a request's draws depend only on (seed, token index), never on
// which other requests share its batch or in what order rows are sampled.
//
// Definition (docs/sampling.md "Random numbers"), portable and bit-exact on every platform:
//   key     = {lo32(seed), hi32(seed)}
//   counter = {lo32(n), hi32(n), 0, 0}       n = tokens this request has sampled so far
//   block   = philox4x32_10(counter, key)    four 32-bit words w0..w3
//   u       = ((w1 << 32 | w0) >> 11) * 2^-53      in [0, 1), 53 random bits
// Word pair (w2, w3) is reserved for a second uniform per token (speculative acceptance).
// The stream advances by one block per sampled token, greedy tokens included, so the uniform of
// token n is fixed by n alone.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace rlt::sampling {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32 block with 10 rounds (the Random123 reference function).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The whole state of a request's stream: two words, trivially copyable. Snapshot it with the
// request on preemption and restore it on resume; serialize it as (seed, counter).
struct RngState {
  uint64_t seed = 0;
  uint64_t counter = 0;  // tokens sampled so far (one block each)

  static RngState from_seed(uint64_t seed) { return {seed, 0}; }

  // The block for the current token, without advancing.
  PhiloxCounter block() const;
  // The sampling uniform of the current token, in [0, 1) (words w0, w1 of block()).
  double uniform() const;
  void advance() { ++counter; }

  friend bool operator==(const RngState&, const RngState&) = default;
};

// splitmix64's output function: a bijection on 64 bits with full avalanche (hashing counters
// into random bits).
uint64_t mix64(uint64_t z);

// Maps 64 random bits to [0, 1) with 53-bit resolution: (bits >> 11) * 2^-53.
double bits_to_unit_double(uint64_t bits);

// The seed of a request that did not give one: splitmix64-mixed FNV-1a-64 hash of the id bytes,
// xor-ed with the engine seed and mixed again, truncated to 63 bits so that the value can be
// reported and passed back as a user seed. Stable across platforms and releases.
uint64_t derive_request_seed(uint64_t engine_seed, std::string_view request_id);

}  // namespace rlt::sampling

// The reproducible generator of random argument data: the same seed gives the same bytes on
// every host and with every standard library.
//
// Element i of argument k draws the 64 bits RandomBits(seed, k, i) =
//   Mix(Mix(Mix(seed) ^ k) ^ i), where Mix is SplitMix64's step: add 0x9E3779B97F4A7C15, then
//   z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31.
// Floats take [0, 1): the top 24 bits × 2^-24 for float32 and narrower (rounded toward zero to
// float16 and bfloat16), the top 53 bits × 2^-53 for float64. Integers take [0, 16) from the top
// 4 bits; bool the top bit.
#pragma once

#include <cstdint>

namespace kprof::core {

constexpr uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t RandomBits(uint64_t seed, uint64_t argument, uint64_t element) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ argument) ^ element);
}

}  // namespace kprof::core

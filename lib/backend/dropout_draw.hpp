// The draw of inverted dropout (Ops::dropout; LoRA's dropout on the adapters' input,
// model/lora.hpp), shared by the CPU loop and the CUDA kernel so that both keep the same
// elements: whether element (row, column) is kept is a pure function of the draw's seed, the
// row's key and the column, whatever the batch the row sits in or the device it runs on.
#pragma once

#include <cstdint>

#if !defined(BRAID_HOST_DEVICE)
#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif
#endif

namespace braid::backend {

// SplitMix64's finaliser (Steele, Lea and Flood 2014): a bijection of 64-bit words whose
// outputs pass BigCrush for consecutive inputs.
BRAID_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Whether dropout at probability p keeps element `col` of the row keyed `row_key` under
// `seed`: a uniform draw in [0, 1) (53 bits of the mixed word) at least p.
BRAID_HOST_DEVICE inline bool dropout_keeps(std::uint64_t seed, std::uint64_t row_key, std::int64_t col, double p) {
  const std::uint64_t h = mix64(mix64(seed ^ row_key) + std::uint64_t(col) * 0x9e3779b97f4a7c15ull);
  return double(h >> 11) * 0x1.0p-53 >= p;
}

// A token's row key: its sequence's key and its position in the sequence.
inline std::uint64_t dropout_row_key(std::uint64_t sequence_key, std::int64_t position) {
  return mix64(sequence_key + 0x9e3779b97f4a7c15ull * std::uint64_t(position + 1));
}

}  // namespace braid::backend

// Rotary position embedding on CUDA, in place, Hugging Face Llama layout (rotate_half):
// one thread per (row, head, pair); inverse turns back (the backward).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void rope(cudaStream_t s, float* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim,
          const std::int32_t* pos, const float* cos, const float* sin, bool inverse);

}  // namespace braid::backend::cuda

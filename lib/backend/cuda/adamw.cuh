// AdamW on CUDA (decoupled weight decay, bias-corrected moments) over f32 master weights,
// one fused pass per tensor (16-byte accesses where the arrays are aligned to them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// AdamWStep (backend.hpp), which the kernels' C++17 cannot include.
struct AdamWParams {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  std::int64_t step;
};

void adamw(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, const AdamWParams& step);
// The same, and copy[i] = w[i] rounded to bf16 (nearest even) in the same pass.
void adamw_bf16_copy(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, void* copy,
                     const AdamWParams& step);

}  // namespace braid::backend::cuda

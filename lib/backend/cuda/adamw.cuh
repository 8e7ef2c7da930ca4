// AdamW on CUDA (decoupled weight decay, bias-corrected moments) over f32 master weights,
// one fused pass per tensor.
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

}  // namespace braid::backend::cuda

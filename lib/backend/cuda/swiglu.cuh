// SwiGLU of the Llama MLP on CUDA: out = silu(gate) · up from rows [gate | up], and its backward.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void swiglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out);
void swiglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                     float* d_gate_up);

}  // namespace braid::backend::cuda

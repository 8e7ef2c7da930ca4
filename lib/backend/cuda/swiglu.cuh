// The gated MLP activations on CUDA, from rows [gate | up], and their backward: SwiGLU (Llama:
// out = silu(gate) · up) and GeGLU (Gemma: out = gelu_tanh(gate) · up, PyTorch's
// gelu(approximate="tanh")).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void swiglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out);
void swiglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                     float* d_gate_up);
void geglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out);
void geglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                    float* d_gate_up);

}  // namespace braid::backend::cuda

#include "backend/cuda/swiglu.cuh"

#include "backend/cuda/check.cuh"

namespace braid::backend::cuda {
namespace {

__global__ void swiglu_forward_kernel(const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    const float g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
    out[i] = g / (1.0f + expf(-g)) * u;
  }
}

// d silu(g)/dg = σ(g) · (1 + g · (1 − σ(g))).
__global__ void swiglu_backward_kernel(const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                                       float* d_gate_up) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    const float g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
    const float sig = 1.0f / (1.0f + expf(-g));
    d_gate_up[r * 2 * inter + inter + j] = d_out[i] * g * sig;
    d_gate_up[r * 2 * inter + j] = d_out[i] * u * sig * (1.0f + g * (1.0f - sig));
  }
}

// gelu_tanh(g) = ½g(1 + tanh(k(g + a·g³))), k = √(2/π), a = 0.044715.
constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

__global__ void geglu_forward_kernel(const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    const float g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
    out[i] = 0.5f * g * (1.0f + tanhf(kGeluK * (g + kGeluA * g * g * g))) * u;
  }
}

// d gelu_tanh(g)/dg = ½(1 + t) + ½g(1 − t²)·k(1 + 3a·g²), t = tanh(k(g + a·g³)).
__global__ void geglu_backward_kernel(const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                                      float* d_gate_up) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    const float g = gate_up[r * 2 * inter + j], u = gate_up[r * 2 * inter + inter + j];
    const float t = tanhf(kGeluK * (g + kGeluA * g * g * g));
    d_gate_up[r * 2 * inter + inter + j] = d_out[i] * 0.5f * g * (1.0f + t);
    d_gate_up[r * 2 * inter + j] =
        d_out[i] * u * (0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluA * g * g));
  }
}

}  // namespace

void geglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  if (n <= 0 || inter <= 0) return;
  geglu_forward_kernel<<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, n, inter, out);
  check_launch("geglu_forward");
}

void geglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                    float* d_gate_up) {
  if (n <= 0 || inter <= 0) return;
  geglu_backward_kernel<<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, d_out, n, inter, d_gate_up);
  check_launch("geglu_backward");
}

void swiglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  if (n <= 0 || inter <= 0) return;
  swiglu_forward_kernel<<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, n, inter, out);
  check_launch("swiglu_forward");
}

void swiglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                     float* d_gate_up) {
  if (n <= 0 || inter <= 0) return;
  swiglu_backward_kernel<<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, d_out, n, inter, d_gate_up);
  check_launch("swiglu_backward");
}

}  // namespace braid::backend::cuda

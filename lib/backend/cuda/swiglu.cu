#include "backend/cuda/swiglu.cuh"

#include "backend/cuda/check.cuh"

namespace braid::backend::cuda {
namespace {

// SwiGLU: silu(g) · u; d silu(g)/dg = σ(g) · (1 + g · (1 − σ(g))).
struct Silu {
  __device__ static float forward(float g, float u) { return g / (1.0f + expf(-g)) * u; }
  __device__ static void backward(float g, float u, float dout, float& dg, float& du) {
    const float sig = 1.0f / (1.0f + expf(-g));
    du = dout * g * sig;
    dg = dout * u * sig * (1.0f + g * (1.0f - sig));
  }
};

// GeGLU: gelu_tanh(g) · u, gelu_tanh(g) = ½g(1 + tanh(k(g + a·g³))), k = √(2/π), a = 0.044715;
// d gelu_tanh(g)/dg = ½(1 + t) + ½g(1 − t²)·k(1 + 3a·g²), t = tanh(k(g + a·g³)).
struct GeluTanh {
  static constexpr float kK = 0.7978845608028654f, kA = 0.044715f;
  __device__ static float forward(float g, float u) { return 0.5f * g * (1.0f + tanhf(kK * (g + kA * g * g * g))) * u; }
  __device__ static void backward(float g, float u, float dout, float& dg, float& du) {
    const float t = tanhf(kK * (g + kA * g * g * g));
    du = dout * 0.5f * g * (1.0f + t);
    dg = dout * u * (0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kK * (1.0f + 3.0f * kA * g * g));
  }
};

template <typename Act>
__global__ void gated_forward_kernel(const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    out[i] = Act::forward(gate_up[r * 2 * inter + j], gate_up[r * 2 * inter + inter + j]);
  }
}

template <typename Act>
__global__ void gated_backward_kernel(const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                                      float* d_gate_up) {
  const std::int64_t total = n * inter;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i % inter;
    Act::backward(gate_up[r * 2 * inter + j], gate_up[r * 2 * inter + inter + j], d_out[i], d_gate_up[r * 2 * inter + j],
                  d_gate_up[r * 2 * inter + inter + j]);
  }
}

template <typename Act>
void forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out, const char* op) {
  if (n <= 0 || inter <= 0) return;
  gated_forward_kernel<Act><<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, n, inter, out);
  check_launch(op);
}

template <typename Act>
void backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
              float* d_gate_up, const char* op) {
  if (n <= 0 || inter <= 0) return;
  gated_backward_kernel<Act><<<blocks_for(n * inter, 256), 256, 0, s>>>(gate_up, d_out, n, inter, d_gate_up);
  check_launch(op);
}

}  // namespace

void swiglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  forward<Silu>(s, gate_up, n, inter, out, "swiglu_forward");
}

void swiglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                     float* d_gate_up) {
  backward<Silu>(s, gate_up, d_out, n, inter, d_gate_up, "swiglu_backward");
}

void geglu_forward(cudaStream_t s, const float* gate_up, std::int64_t n, std::int64_t inter, float* out) {
  forward<GeluTanh>(s, gate_up, n, inter, out, "geglu_forward");
}

void geglu_backward(cudaStream_t s, const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                    float* d_gate_up) {
  backward<GeluTanh>(s, gate_up, d_out, n, inter, d_gate_up, "geglu_backward");
}

}  // namespace braid::backend::cuda

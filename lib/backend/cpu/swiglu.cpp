// The gated MLP activations, from the fused [gate | up] projection: SwiGLU (Llama:
// silu(gate) · up) and GeGLU (Gemma: gelu_tanh(gate) · up).
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cmath>

namespace braid::backend::cpu {

template <typename T>
void swiglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) {
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* g = gate_up + r * 2 * inter;
      const T* u = g + inter;
      T* o = out + r * inter;
      for (std::int64_t j = 0; j < inter; ++j) o[j] = g[j] / (T(1) + std::exp(-g[j])) * u[j];
    }
  });
}

// d silu(g)/dg = σ(g) · (1 + g · (1 − σ(g))).
template <typename T>
void swiglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up) {
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
  for (std::int64_t r = lo; r < hi; ++r) {
    const T* g = gate_up + r * 2 * inter;
    const T* u = g + inter;
    const T* dout = d_out + r * inter;
    T* dg = d_gate_up + r * 2 * inter;
    T* du = dg + inter;
    for (std::int64_t j = 0; j < inter; ++j) {
      const T sig = T(1) / (T(1) + std::exp(-g[j]));
      du[j] = dout[j] * g[j] * sig;
      dg[j] = dout[j] * u[j] * sig * (T(1) + g[j] * (T(1) - sig));
    }
  }
  });
}

namespace {

// PyTorch's gelu(approximate="tanh"): ½x(1 + tanh(k(x + a·x³))), k = √(2/π), a = 0.044715.
constexpr double kGeluK = 0.7978845608028654;
constexpr double kGeluA = 0.044715;

}  // namespace

template <typename T>
void geglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) {
  const T k = T(kGeluK), a = T(kGeluA);
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* g = gate_up + r * 2 * inter;
      const T* u = g + inter;
      T* o = out + r * inter;
      for (std::int64_t j = 0; j < inter; ++j) {
        const T x = g[j];
        o[j] = T(0.5) * x * (T(1) + std::tanh(k * (x + a * x * x * x))) * u[j];
      }
    }
  });
}

// d gelu_tanh(x)/dx = ½(1 + t) + ½x(1 − t²)·k(1 + 3a·x²), t = tanh(k(x + a·x³)).
template <typename T>
void geglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up) {
  const T k = T(kGeluK), a = T(kGeluA);
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* g = gate_up + r * 2 * inter;
      const T* u = g + inter;
      const T* dout = d_out + r * inter;
      T* dg = d_gate_up + r * 2 * inter;
      T* du = dg + inter;
      for (std::int64_t j = 0; j < inter; ++j) {
        const T x = g[j];
        const T t = std::tanh(k * (x + a * x * x * x));
        du[j] = dout[j] * T(0.5) * x * (T(1) + t);
        dg[j] = dout[j] * u[j] * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * a * x * x));
      }
    }
  });
}

template void geglu_forward<float>(const float*, std::int64_t, std::int64_t, float*);
template void geglu_forward<double>(const double*, std::int64_t, std::int64_t, double*);
template void geglu_backward<float>(const float*, const float*, std::int64_t, std::int64_t, float*);
template void geglu_backward<double>(const double*, const double*, std::int64_t, std::int64_t, double*);
template void swiglu_forward<float>(const float*, std::int64_t, std::int64_t, float*);
template void swiglu_forward<double>(const double*, std::int64_t, std::int64_t, double*);
template void swiglu_backward<float>(const float*, const float*, std::int64_t, std::int64_t, float*);
template void swiglu_backward<double>(const double*, const double*, std::int64_t, std::int64_t, double*);

}  // namespace braid::backend::cpu

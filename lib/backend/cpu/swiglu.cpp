// The gated MLP activations, from the fused [gate | up] projection: SwiGLU (Llama:
// silu(gate) · up) and GeGLU (Gemma: gelu_tanh(gate) · up).
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cmath>

namespace braid::backend::cpu {
namespace {

// The row loops both activations share: out[j] = fwd(gate[j], up[j]); the backward's
// bwd(gate[j], up[j], d_out[j], d_gate[j], d_up[j]) writes both gradients.
template <typename T, typename Fwd>
void gated_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out, Fwd fwd) {
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* g = gate_up + r * 2 * inter;
      const T* u = g + inter;
      T* o = out + r * inter;
      for (std::int64_t j = 0; j < inter; ++j) o[j] = fwd(g[j], u[j]);
    }
  });
}

template <typename T, typename Bwd>
void gated_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up, Bwd bwd) {
  parallel_for(n, kParallelMin / inter, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* g = gate_up + r * 2 * inter;
      const T* u = g + inter;
      const T* dout = d_out + r * inter;
      T* dg = d_gate_up + r * 2 * inter;
      T* du = dg + inter;
      for (std::int64_t j = 0; j < inter; ++j) bwd(g[j], u[j], dout[j], dg[j], du[j]);
    }
  });
}

// PyTorch's gelu(approximate="tanh"): ½x(1 + tanh(k(x + a·x³))), k = √(2/π), a = 0.044715.
constexpr double kGeluK = 0.7978845608028654;
constexpr double kGeluA = 0.044715;

}  // namespace

template <typename T>
void swiglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) {
  gated_forward<T>(gate_up, n, inter, out, [](T g, T u) { return g / (T(1) + std::exp(-g)) * u; });
}

// d silu(g)/dg = σ(g) · (1 + g · (1 − σ(g))).
template <typename T>
void swiglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up) {
  gated_backward<T>(gate_up, d_out, n, inter, d_gate_up, [](T g, T u, T dout, T& dg, T& du) {
    const T sig = T(1) / (T(1) + std::exp(-g));
    du = dout * g * sig;
    dg = dout * u * sig * (T(1) + g * (T(1) - sig));
  });
}

template <typename T>
void geglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) {
  const T k = T(kGeluK), a = T(kGeluA);
  gated_forward<T>(gate_up, n, inter, out,
                   [=](T x, T u) { return T(0.5) * x * (T(1) + std::tanh(k * (x + a * x * x * x))) * u; });
}

// d gelu_tanh(x)/dx = ½(1 + t) + ½x(1 − t²)·k(1 + 3a·x²), t = tanh(k(x + a·x³)).
template <typename T>
void geglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up) {
  const T k = T(kGeluK), a = T(kGeluA);
  gated_backward<T>(gate_up, d_out, n, inter, d_gate_up, [=](T x, T u, T dout, T& dg, T& du) {
    const T t = std::tanh(k * (x + a * x * x * x));
    du = dout * T(0.5) * x * (T(1) + t);
    dg = dout * u * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * a * x * x));
  });
}

template void swiglu_forward<float>(const float*, std::int64_t, std::int64_t, float*);
template void swiglu_forward<double>(const double*, std::int64_t, std::int64_t, double*);
template void swiglu_backward<float>(const float*, const float*, std::int64_t, std::int64_t, float*);
template void swiglu_backward<double>(const double*, const double*, std::int64_t, std::int64_t, double*);
template void geglu_forward<float>(const float*, std::int64_t, std::int64_t, float*);
template void geglu_forward<double>(const double*, std::int64_t, std::int64_t, double*);
template void geglu_backward<float>(const float*, const float*, std::int64_t, std::int64_t, float*);
template void geglu_backward<double>(const double*, const double*, std::int64_t, std::int64_t, double*);

}  // namespace braid::backend::cpu

// Rotary position embedding, Hugging Face Llama layout: the two halves of a head
// (not interleaved pairs) form the rotated pairs (rotate_half).
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

namespace braid::backend::cpu {

template <typename T>
void rope(T* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim, const std::int32_t* pos,
          const T* cos, const T* sin, bool inverse) {
  const int half = head_dim / 2;
  const T sign = inverse ? T(-1) : T(1);
  parallel_for(n, kParallelMin / stride, [&](std::int64_t lo, std::int64_t hi) {
  for (std::int64_t r = lo; r < hi; ++r) {
    const T* c = cos + std::int64_t(pos[r]) * half;
    const T* s = sin + std::int64_t(pos[r]) * half;
    for (int h = 0; h < n_heads; ++h) {
      T* xh = x + r * stride + std::int64_t(h) * head_dim;
      for (int j = 0; j < half; ++j) {
        const T a = xh[j], b = xh[j + half];
        const T sj = sign * s[j];
        xh[j] = a * c[j] - b * sj;
        xh[j + half] = b * c[j] + a * sj;
      }
    }
  }
  });
}

template void rope<float>(float*, std::int64_t, std::int64_t, int, int, const std::int32_t*, const float*,
                          const float*, bool);
template void rope<double>(double*, std::int64_t, std::int64_t, int, int, const std::int32_t*, const double*,
                           const double*, bool);

}  // namespace braid::backend::cpu

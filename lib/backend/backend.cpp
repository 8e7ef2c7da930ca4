#include "backend/backend.hpp"

#include <sched.h>

#include <stdexcept>

namespace braid::backend {

template <>
Ops<float>& Backend::ops<float>() {
  if (Ops<float>* o = f32_ops()) return *o;
  throw std::logic_error("backend " + name() + " has no float32 ops");
}

template <>
Ops<double>& Backend::ops<double>() {
  if (Ops<double>* o = f64_ops()) return *o;
  throw std::logic_error("backend " + name() + " has no float64 ops");
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

}  // namespace braid::backend

// AdamW on fp32 master weights. Tensors stored in f32 are their own master. For tensors
// stored narrower (model::ModelOptions::dtype = bf16) the optimizer owns an f32 master copy:
// it starts as the compute copy widened, each step updates it and rounds it back into the
// compute copy, and while the optimizer lives the tensor's `data` points at it (so that a
// checkpoint saved during training holds the master values). The model must outlive the
// optimizer (it holds the tensors' pointers); the destructor detaches the masters.
//
// Gradient accumulation: backward() adds into the gradients, so k micro-batches are
// k backward calls and one step(lr, 1.0 / k). Clipping by global norm uses the norm of
// the scaled gradients; on a pipeline the caller all-reduces grad_sq_norm() over stages
// and passes the global norm to step_with_norm().
#pragma once

#include "backend/backend.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;   // decoupled; applied to matrices only (not norms)
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

class AdamW {
 public:
  AdamW(backend::Backend& be, std::span<model::Tensor<float>> tensors, const AdamWConfig& cfg);
  ~AdamW();
  AdamW(AdamW&&) noexcept;
  AdamW& operator=(AdamW&&) = delete;
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // Σ g² of the gradients scaled by grad_scale (local to this stage).
  double grad_sq_norm(double grad_scale = 1.0) const;
  // One update with the gradients times grad_scale, clipped against global_norm
  // (the norm of the scaled gradients over every stage). Returns the clip factor.
  double step_with_norm(double lr, double grad_scale, double global_norm);
  // grad_sq_norm + step_with_norm on this stage alone; returns the global norm before clipping.
  double step(double lr, double grad_scale = 1.0);

  std::int64_t steps_taken() const { return step_; }
  const AdamWConfig& config() const { return cfg_; }
  // The moments, in tensor order (for checkpoints of the optimizer state).
  std::span<float> first_moment() { return {m_.data(), m_.size()}; }
  std::span<float> second_moment() { return {v_.data(), v_.size()}; }
  void set_steps_taken(std::int64_t s) { step_ = s; }

 private:
  // w: the f32 master; compute: the narrower copy to refresh after each step (or nullptr).
  struct Group {
    float* w; const float* g; std::int64_t n; std::int64_t offset; bool decay;
    void* compute = nullptr; backend::DType compute_type = backend::DType::f32;
  };
  backend::Backend* be_;
  AdamWConfig cfg_;
  std::vector<Group> groups_;
  backend::Buffer<float> m_, v_;
  backend::Buffer<float> master_;                 // masters of the narrower tensors
  std::vector<model::Tensor<float>*> mastered_;   // tensors whose data points into master_
  std::int64_t step_ = 0;
};

// Learning rate at a step (0-based): linear warmup, peak · (step + 1) / warmup_steps, then
// constant, or cosine down to min_lr at total_steps.
struct LrSchedule {
  enum class Kind { constant, cosine };
  double peak_lr = 1e-3;
  double min_lr = 0.0;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;
  Kind kind = Kind::cosine;

  double at(std::int64_t step) const;
};

}  // namespace braid::optim

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
//
// Data parallelism, ZeRO stage 1 (DataParallel::comm of more than one rank): the model's
// parameters, as one array in tensor order, are cut into one contiguous shard per rank
// (rank r: elements [P·r/dp, P·(r+1)/dp)). A rank keeps the two moments, and the f32
// masters of narrower tensors, of its shard only (1/dp of them). step() first sums the
// gradients over the ranks (a bucketed all-reduce), takes the global norm from each
// rank's Σg² over its shard, updates its shard, and all-gathers the updated weights (the
// compute copy: f32 or bf16 bytes) so every rank holds the whole model again. The
// moments a checkpoint holds are the whole arrays: gather_state / scatter_state move
// them between the shards and whole arrays on one rank (the writer, the reader), point
// to point, so no other rank ever holds more than its shard. Every call that talks to
// the other ranks is collective.
//
// Tensor parallelism (model/tensor_parallel.hpp; the tensors are one tp rank's slices
// and the replicated tensors): each tp rank runs its own AdamW over its own parameters
// (data parallelism, if any, over the ranks holding the same slices: comm::Mesh's cross
// group), so the state is per slice. Only the gradient norm crosses the tp group: the
// sum of Σg² over the ranks counts each rank's slices and, once, the replicated tensors
// (whose gradients are the same on every tp rank): grad_sq_norm counts them on tp rank
// 0 only, and step() sums over the group.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace braid::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;   // decoupled; applied to matrices only (not norms)
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// 4 Mi floats (16 MiB) a bucket: large enough that a bucket's latency is small beside
// its transfer, small enough that a transport stages little at once.
inline constexpr std::size_t kDefaultBucketElements = std::size_t{1} << 22;

struct DataParallel {
  comm::Communicator* comm = nullptr;   // the data-parallel ranks; nullptr or 1 rank: none
  std::size_t bucket_elements = kDefaultBucketElements;   // gradient all-reduce bucket
};

class AdamW {
 public:
  // Collective over dp.comm when it has more than one rank. tp: the tp group the tensors
  // are slices of (the model's tensor_parallel()); its group is used by step() only.
  AdamW(backend::Backend& be, std::span<model::Tensor<float>> tensors, const AdamWConfig& cfg,
        DataParallel dp = {}, model::TensorParallel tp = {});
  ~AdamW();
  AdamW(AdamW&&) noexcept;
  AdamW& operator=(AdamW&&) = delete;
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // Σ g² of the gradients scaled by grad_scale, over the elements this rank updates (its
  // shard; every tensor without data parallelism; local to this stage on a pipeline),
  // replicated tensors counted on tp rank 0 only: summed over the tp group (and the
  // data-parallel ranks, and a pipeline's stages) it is the square of the global norm.
  double grad_sq_norm(double grad_scale = 1.0) const;
  // One update of this rank's shard with the gradients times grad_scale, clipped against
  // global_norm (the norm of the scaled gradients over every stage), then, under data
  // parallelism, the all-gather of the updated weights. Returns the clip factor.
  double step_with_norm(double lr, double grad_scale, double global_norm);
  // Under data parallelism the gradient sum over the ranks and the norm over every
  // shard first (and over the tp group); then as grad_sq_norm + step_with_norm. Returns
  // the global norm before clipping.
  double step(double lr, double grad_scale = 1.0);
  // The sum of every rank's gradients into each rank's (bucketed; nothing without data
  // parallelism). step() calls it.
  void reduce_gradients();

  std::int64_t steps_taken() const { return step_; }
  const AdamWConfig& config() const { return cfg_; }
  // The moments of this rank's shard (every parameter without data parallelism), in
  // tensor order from element shard_begin().
  std::span<float> first_moment() { return {m_.data(), m_.size()}; }
  std::span<float> second_moment() { return {v_.data(), v_.size()}; }
  void set_steps_taken(std::int64_t s) { step_ = s; }

  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_size_; }
  std::int64_t parameter_count() const { return total_; }
  std::int64_t shard_begin() const { return shard_begin_; }
  std::int64_t shard_size() const { return shard_end_ - shard_begin_; }
  // Bytes this rank holds for the optimizer: the moments and the f32 masters of its shard.
  std::int64_t state_bytes() const;

  // The whole moments (parameter_count() floats each, backend memory) from every
  // rank's shard, on rank `root` only: collective under data parallelism (the other
  // ranks send their shards and may pass empty spans), a copy without. Only the writer
  // of a checkpoint ever holds the whole state.
  void gather_state(int root, std::span<float> exp_avg, std::span<float> exp_avg_sq);
  // The reverse: `root` holds whole moments (as a checkpoint file has them) and every
  // rank takes its shard of them (the others may pass empty spans).
  void scatter_state(int root, std::span<const float> exp_avg, std::span<const float> exp_avg_sq);
  // Under data parallelism with narrower tensors: every shard's f32 master gathered into
  // a whole copy on rank `root`, and its tensors' `data` pointed at it, so that a
  // checkpoint written there now holds the masters (collective; until the next step).
  // Nothing to do otherwise: `data` already is the master.
  void gather_masters(int root);
  // The data-parallel ranks (nullptr: none).
  comm::Communicator* data_parallel() const { return dp_.comm; }

 private:
  // w: the f32 master; compute: the narrower copy to refresh after each step (or nullptr).
  struct Group {
    float* w; const float* g; std::int64_t n; std::int64_t offset; bool decay;
    bool counted = true;   // in grad_sq_norm (false: a replicated tensor off tp rank 0)
    void* compute = nullptr; backend::DType compute_type = backend::DType::f32;
  };
  void gather_weights();
  std::vector<std::size_t> shard_counts() const;
  std::int64_t shard_begin_of(int rank) const { return total_ * rank / dp_size_; }

  backend::Backend* be_;
  AdamWConfig cfg_;
  DataParallel dp_;
  model::TensorParallel tp_;
  int dp_rank_ = 0, dp_size_ = 1;
  std::int64_t total_ = 0, shard_begin_ = 0, shard_end_ = 0;
  std::vector<Group> groups_;                     // this rank's shard of every tensor
  backend::Buffer<float> m_, v_;
  backend::Buffer<float> master_;                 // masters of the narrower tensors (shard)
  backend::Buffer<float> whole_master_;           // gather_masters' copy
  std::vector<model::Tensor<float>*> mastered_;   // tensors whose data points into a master
  std::vector<std::pair<model::Tensor<float>*, std::int64_t>> narrow_;   // narrower tensors, offsets
  std::vector<std::int64_t> tensor_starts_;       // every tensor's first element in the array
  // The model's arrays, for the collectives: the compute copy (elem_bytes_ per element)
  // and the gradients, each contiguous in tensor order.
  void* weights_base_ = nullptr;
  std::size_t elem_bytes_ = 4;
  float* grads_base_ = nullptr;
  std::int64_t step_ = 0;
};

// Learning rate at a step (0-based, the optimizer's global step): linear warmup,
// peak · (step + 1) / warmup_steps, then constant, or a cosine or linear decay from peak
// at warmup_steps down to min_lr at total_steps (min_lr after it).
struct LrSchedule {
  enum class Kind { constant, cosine, linear };
  double peak_lr = 1e-3;
  double min_lr = 0.0;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;
  Kind kind = Kind::cosine;

  double at(std::int64_t step) const;
};

}  // namespace braid::optim

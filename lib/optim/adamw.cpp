#include "optim/adamw.hpp"

#include "backend/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace braid::optim {

AdamW::AdamW(backend::Backend& be, std::span<model::Tensor<float>> tensors, const AdamWConfig& cfg, DataParallel dp,
             model::TensorParallel tp)
    : be_(&be), cfg_(cfg), dp_(dp), tp_(tp) {
  if (tp_.size <= 1) tp_ = {};
  if (dp_.comm != nullptr && dp_.comm->size() > 1) {
    dp_rank_ = dp_.comm->rank();
    dp_size_ = dp_.comm->size();
  } else {
    dp_.comm = nullptr;
  }
  for (model::Tensor<float>& t : tensors) {
    if (t.dtype != backend::DType::f32) {
      if (t.data) throw std::logic_error("AdamW: tensor " + t.name + " already has a master copy (a second optimizer?)");
      if (!be.supports(backend::Op::adamw, t.dtype))
        throw std::logic_error("AdamW: backend " + be.name() + " cannot refresh " +
                               std::string(backend::dtype_name(t.dtype)) + " weights");
    }
    total_ += t.numel;
  }
  shard_begin_ = total_ * dp_rank_ / dp_size_;
  shard_end_ = total_ * (dp_rank_ + 1) / dp_size_;

  // The collectives see the compute copy and the gradients as one array each: the model
  // lays its tensors out back to back (model.hpp: parameters(), gradients()).
  if (!tensors.empty()) {
    weights_base_ = tensors.front().weights;
    elem_bytes_ = backend::dtype_size(tensors.front().dtype);
    grads_base_ = tensors.front().grad;
  }
  if (dp_.comm != nullptr) {
    std::int64_t off = 0;
    for (const model::Tensor<float>& t : tensors) {
      if (backend::dtype_size(t.dtype) != elem_bytes_ ||
          t.weights != static_cast<char*>(weights_base_) + std::size_t(off) * elem_bytes_ || t.grad != grads_base_ + off) {
        throw std::logic_error("AdamW: data parallelism needs the tensors back to back in one array of one type (" +
                               t.name + " is not)");
      }
      off += t.numel;
    }
  }

  // This rank's shard of each tensor: [lo, hi) of the whole array.
  std::int64_t narrow = 0, off = 0;
  for (model::Tensor<float>& t : tensors) {
    const std::int64_t lo = std::max(off, shard_begin_), hi = std::min(off + t.numel, shard_end_);
    if (t.dtype != backend::DType::f32) {
      if (hi > lo) narrow += hi - lo;
      narrow_.emplace_back(&t, off);
    }
    tensor_starts_.push_back(off);
    off += t.numel;
  }
  master_ = backend::Buffer<float>(be, std::size_t(narrow));
  backend::Ops<float>& ops = be.ops<float>();
  std::int64_t master_off = 0;
  off = 0;
  for (model::Tensor<float>& t : tensors) {
    const std::int64_t lo = std::max(off, shard_begin_), hi = std::min(off + t.numel, shard_end_);
    const std::int64_t first = lo - off;   // the shard's first element within the tensor
    off += t.numel;
    if (hi <= lo && dp_.comm != nullptr) continue;   // another rank's
    const std::int64_t n = std::max<std::int64_t>(hi - lo, 0);
    // Decay the matrices; norms (1-D gains) keep their scale, as in GPT-2/Llama recipes.
    Group g{nullptr, t.grad + first, n, lo - shard_begin_, t.shape.size() >= 2};
    g.counted = t.slice.split() || tp_.rank == 0;
    if (t.dtype != backend::DType::f32) {
      float* master = master_.data() + master_off;
      master_off += n;
      void* compute = static_cast<char*>(t.weights) + std::size_t(first) * backend::dtype_size(t.dtype);
      ops.convert(n, compute, t.dtype, master, backend::DType::f32);
      if (dp_.comm == nullptr) {   // the whole master: the tensor's data while we live
        t.data = master;
        mastered_.push_back(&t);
      }
      g.w = master;
      g.compute = compute;
      g.compute_type = t.dtype;
    } else {
      g.w = t.data + first;
    }
    groups_.push_back(g);
  }
  m_ = backend::Buffer<float>(be, std::size_t(shard_end_ - shard_begin_));
  v_ = backend::Buffer<float>(be, std::size_t(shard_end_ - shard_begin_));
}

AdamW::~AdamW() {
  for (model::Tensor<float>* t : mastered_) t->data = nullptr;
}

AdamW::AdamW(AdamW&& o) noexcept
    : be_(o.be_), cfg_(o.cfg_), dp_(o.dp_), tp_(o.tp_), dp_rank_(o.dp_rank_), dp_size_(o.dp_size_), total_(o.total_),
      shard_begin_(o.shard_begin_), shard_end_(o.shard_end_), groups_(std::move(o.groups_)), m_(std::move(o.m_)),
      v_(std::move(o.v_)), master_(std::move(o.master_)), whole_master_(std::move(o.whole_master_)),
      mastered_(std::move(o.mastered_)), narrow_(std::move(o.narrow_)), tensor_starts_(std::move(o.tensor_starts_)), weights_base_(o.weights_base_), elem_bytes_(o.elem_bytes_),
      grads_base_(o.grads_base_), step_(o.step_) {
  o.mastered_.clear();
}

std::int64_t AdamW::state_bytes() const {
  return static_cast<std::int64_t>((m_.size() + v_.size() + master_.size()) * sizeof(float));
}

std::vector<std::size_t> AdamW::shard_counts() const {
  std::vector<std::size_t> counts(static_cast<std::size_t>(dp_size_));
  for (int r = 0; r < dp_size_; ++r) {
    counts[std::size_t(r)] = std::size_t(total_ * (r + 1) / dp_size_ - total_ * r / dp_size_);
  }
  return counts;
}

void AdamW::reduce_gradients() {
  if (dp_.comm == nullptr || total_ == 0) return;
  comm::all_reduce_bucketed(*dp_.comm, {grads_base_, std::size_t(total_)}, dp_.bucket_elements);
}

double AdamW::grad_sq_norm(double grad_scale) const {
  // One reduction over every gradient where they live; only the sum comes back.
  std::vector<std::span<const float>> grads;
  grads.reserve(groups_.size());
  for (const Group& g : groups_) {
    if (g.counted) grads.emplace_back(g.g, static_cast<std::size_t>(g.n));
  }
  return be_->ops<float>().global_sum_squares(grads) * grad_scale * grad_scale;
}

double AdamW::step_with_norm(double lr, double grad_scale, double global_norm) {
  if (whole_master_.size() > 0) {   // gather_masters' copy is stale from here on
    for (model::Tensor<float>* t : mastered_) t->data = nullptr;
    mastered_.clear();
    whole_master_.reset();
  }
  double clip = 1.0;
  if (cfg_.max_grad_norm > 0 && global_norm > cfg_.max_grad_norm) clip = cfg_.max_grad_norm / (global_norm + 1e-6);
  ++step_;
  backend::Ops<float>& ops = be_->ops<float>();
  for (const Group& g : groups_) {
    if (g.n == 0) continue;
    backend::AdamWStep s{float(lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps),
                         g.decay ? float(cfg_.weight_decay) : 0.0f, float(grad_scale * clip), step_};
    if (g.compute)
      ops.adamw_with_copy(g.n, g.w, g.g, m_.data() + g.offset, v_.data() + g.offset, s, g.compute, g.compute_type);
    else
      ops.adamw(g.n, g.w, g.g, m_.data() + g.offset, v_.data() + g.offset, s);
  }
  gather_weights();
  return clip;
}

void AdamW::gather_weights() {
  if (dp_.comm == nullptr) return;
  std::vector<std::size_t> bytes = shard_counts();
  for (auto& b : bytes) b *= elem_bytes_;
  dp_.comm->all_gather_varying_bytes(weights_base_, bytes);
}

double AdamW::step(double lr, double grad_scale) {
  reduce_gradients();
  double sq = grad_sq_norm(grad_scale);
  if (dp_.comm != nullptr) dp_.comm->all_reduce_sum(std::span<double>(&sq, 1));
  if (tp_.group != nullptr) tp_.group->all_reduce_sum(std::span<double>(&sq, 1));
  const double norm = std::sqrt(sq);
  step_with_norm(lr, grad_scale, norm);
  return norm;
}

namespace {

// Tags of the state's point-to-point messages (the communicator's collectives do not
// see tags).
constexpr int kTagExpAvg = 7101, kTagExpAvgSq = 7102, kTagMaster = 7103;

void require_whole(const char* what, std::size_t a, std::size_t b, std::int64_t total) {
  if (a != std::size_t(total) || b != std::size_t(total)) {
    throw std::invalid_argument(std::string("AdamW::") + what + ": the buffers hold " + std::to_string(a) + " and " +
                                std::to_string(b) + " elements, the model " + std::to_string(total));
  }
}

}  // namespace

void AdamW::gather_state(int root, std::span<float> exp_avg, std::span<float> exp_avg_sq) {
  const std::size_t mine = std::size_t(shard_end_ - shard_begin_);
  if (dp_.comm != nullptr && dp_rank_ != root) {
    dp_.comm->send(std::span<const float>(m_.data(), mine), root, kTagExpAvg);
    dp_.comm->send(std::span<const float>(v_.data(), mine), root, kTagExpAvgSq);
    return;
  }
  require_whole("gather_state", exp_avg.size(), exp_avg_sq.size(), total_);
  if (mine > 0) {
    be_->copy(exp_avg.data() + shard_begin_, m_.data(), mine * sizeof(float));
    be_->copy(exp_avg_sq.data() + shard_begin_, v_.data(), mine * sizeof(float));
  }
  if (dp_.comm == nullptr) return;
  const auto counts = shard_counts();
  for (int q = 0; q < dp_size_; ++q) {
    if (q == root) continue;
    const std::size_t at = std::size_t(shard_begin_of(q)), n = counts[std::size_t(q)];
    dp_.comm->recv(exp_avg.subspan(at, n), q, kTagExpAvg);
    dp_.comm->recv(exp_avg_sq.subspan(at, n), q, kTagExpAvgSq);
  }
}

void AdamW::scatter_state(int root, std::span<const float> exp_avg, std::span<const float> exp_avg_sq) {
  const std::size_t mine = std::size_t(shard_end_ - shard_begin_);
  if (dp_.comm != nullptr && dp_rank_ != root) {
    dp_.comm->recv(std::span<float>(m_.data(), mine), root, kTagExpAvg);
    dp_.comm->recv(std::span<float>(v_.data(), mine), root, kTagExpAvgSq);
    return;
  }
  require_whole("scatter_state", exp_avg.size(), exp_avg_sq.size(), total_);
  if (mine > 0) {
    be_->copy(m_.data(), exp_avg.data() + shard_begin_, mine * sizeof(float));
    be_->copy(v_.data(), exp_avg_sq.data() + shard_begin_, mine * sizeof(float));
  }
  if (dp_.comm == nullptr) return;
  const auto counts = shard_counts();
  for (int q = 0; q < dp_size_; ++q) {
    if (q == root) continue;
    const std::size_t at = std::size_t(shard_begin_of(q)), n = counts[std::size_t(q)];
    dp_.comm->send(exp_avg.subspan(at, n), q, kTagExpAvg);
    dp_.comm->send(exp_avg_sq.subspan(at, n), q, kTagExpAvgSq);
  }
}

void AdamW::gather_masters(int root) {
  if (dp_.comm == nullptr || narrow_.empty()) return;   // the same answer on every rank
  if (dp_rank_ != root) {
    // This rank's shard of the master, in element order (its groups are consecutive).
    for (const Group& g : groups_) {
      if (g.n > 0) dp_.comm->send(std::span<const float>(g.w, std::size_t(g.n)), root, kTagMaster);
    }
    return;
  }
  whole_master_ = backend::Buffer<float>(*be_, std::size_t(total_));
  for (const Group& g : groups_) {
    if (g.n > 0) be_->copy(whole_master_.data() + shard_begin_ + g.offset, g.w, std::size_t(g.n) * sizeof(float));
  }
  // Another rank's groups: the same tensor cuts of its shard, so receive tensor by tensor.
  const std::vector<std::int64_t>& cuts = tensor_starts_;
  for (int q = 0; q < dp_size_; ++q) {
    if (q == root) continue;
    const std::int64_t lo = shard_begin_of(q), hi = shard_begin_of(q + 1);
    std::int64_t at = lo;
    while (at < hi) {
      // The next tensor boundary after `at` (or the shard's end).
      std::int64_t end = hi;
      for (std::int64_t c : cuts) {
        if (c > at && c < end) end = c;
      }
      dp_.comm->recv(std::span<float>(whole_master_.data() + at, std::size_t(end - at)), q, kTagMaster);
      at = end;
    }
  }
  mastered_.clear();
  for (const auto& [t, offset] : narrow_) {
    t->data = whole_master_.data() + offset;
    mastered_.push_back(t);
  }
}

double LrSchedule::at(std::int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) return peak_lr * double(step + 1) / double(warmup_steps);
  if (kind == Kind::constant || total_steps <= warmup_steps) return peak_lr;
  const double progress = std::min(1.0, double(step - warmup_steps) / double(total_steps - warmup_steps));
  if (kind == Kind::linear) return min_lr + (peak_lr - min_lr) * (1.0 - progress);
  return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace braid::optim

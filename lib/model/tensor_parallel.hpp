// Tensor parallelism, Megatron-LM style (docs/parallel.md): a model's tp ranks each hold
// a slice of every large matrix, and the ranks of a tp group run the same forward and
// backward on the same tokens, summing partial results with an all-reduce.
//
//   q_proj, k_proj, v_proj   column-parallel, by heads: rank r holds query heads
//                            [r·H/tp, (r+1)·H/tp) and the key/value heads they read
//                            ([r·KV/tp, (r+1)·KV/tp): GQA groups stay on one rank)
//   o_proj                   row-parallel: the columns of those query heads
//   gate_proj, up_proj       column-parallel: intermediate units split_range(I, tp, r)
//   down_proj                row-parallel: the same units as columns
//   embed_tokens, lm_head    vocabulary-parallel: rows split_range(V, tp, r)
//   LoRA adapters            as the matrix they adapt (Megatron's and PEFT's way): B of a
//                            column-parallel matrix cut as its rows, A of a row-parallel
//                            one as its columns; A of q/k/v/gate/up and B of o/down
//                            replicated (each rank's gradient of these is a part of the
//                            whole one: the model sums them over the group each backward)
//   q/k/v and gate/up biases cut as their matrices' rows
//   norms (q_norm, k_norm too), o_proj and down_proj biases, score: replicated (every rank
//                            holds all of it; q_norm's and k_norm's gradients, which each
//                            rank's heads contribute to, are summed over the group)
//
// A slice is contiguous along one axis of the full Hugging Face tensor, so a rank's
// slices are what WeightShardReader::read_slice reads, and the parts of ranks 0..tp-1
// concatenated along that axis are the full tensor.
#pragma once

#include "model/config.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace braid::comm { class Communicator; }
namespace braid::backend { class Backend; }

namespace braid::model {

// The tensor-parallel group a model belongs to. size 1: no tensor parallelism. A model
// with size > 1 and no group holds its slices but cannot run a forward (resharding, tests).
struct TensorParallel {
  int size = 1;
  int rank = 0;
  comm::Communicator* group = nullptr;   // the tp group: `size` ranks, this one `rank`
};

// Part r of n units cut into `parts`: [n·r/parts, n·(r+1)/parts).
std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int parts, int r);

// Where a tensor's slice lies in the full tensor.
struct TpSlice {
  int axis = -1;                 // -1: replicated; 0: rows; 1: columns
  std::int64_t begin = 0, end = 0;   // along axis (0, full extent when replicated)
  bool split() const { return axis >= 0; }
};

// The slice of tensor `name` (a Hugging Face name, or braid's score.weight) that rank
// `rank` of `size` holds; full_shape is the tensor's shape in a tp=1 model.
TpSlice tp_slice(const ModelConfig& cfg, const std::string& name, const std::vector<std::int64_t>& full_shape,
                 int size, int rank);
// std::invalid_argument when cfg cannot be split `size` ways (KV heads not divisible,
// fewer intermediate units or vocabulary rows than ranks).
void check_tensor_parallel(const ModelConfig& cfg, int size);

// The slice of a full row-major tensor (host memory).
template <typename T>
std::vector<T> extract_slice(const T* full, const std::vector<std::int64_t>& full_shape, const TpSlice& s);
// Writes a slice into its place in a full row-major tensor (host memory).
template <typename T>
void insert_slice(T* full, const std::vector<std::int64_t>& full_shape, const TpSlice& s, const T* part);

// Sum (or max) of data[n] over the tp group, in place. data is memory of the backend:
// passed to the communicator as it is where the host can read it or the group takes
// device memory (comm::device_group: NCCL or its own staging), staged through host
// memory otherwise. Nothing to do when tp.size == 1.
template <typename T>
void tp_all_reduce(backend::Backend& be, const TensorParallel& tp, T* data, std::int64_t n, bool max = false);

}  // namespace braid::model

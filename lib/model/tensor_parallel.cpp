#include "model/tensor_parallel.hpp"

#include "backend/backend.hpp"
#include "comm/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace braid::model {
namespace {

// Rows and columns of a 2-D tensor (a 1-D one, a bias, is a column: split along axis 0 it
// is cut into runs of elements).
std::pair<std::int64_t, std::int64_t> rows_cols(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return {shape[0], 1};
  if (shape.size() != 2) throw std::invalid_argument("tensor-parallel slices are of 1-D or 2-D tensors");
  return {shape[0], shape[1]};
}

}  // namespace

std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int parts, int r) {
  if (parts < 1 || r < 0 || r >= parts) throw std::invalid_argument(fmt::format("no part {} of {}", r, parts));
  return {n * r / parts, n * (r + 1) / parts};
}

void check_tensor_parallel(const ModelConfig& cfg, int size) {
  if (size < 1) throw std::invalid_argument(fmt::format("tensor-parallel size {} is not positive", size));
  if (size == 1) return;
  if (cfg.num_key_value_heads % size != 0)
    throw std::invalid_argument(fmt::format("tp {} does not divide the {} key/value heads (num_key_value_heads)", size,
                                            cfg.num_key_value_heads));
  if (cfg.intermediate_size < size || cfg.vocab_size < size)
    throw std::invalid_argument(fmt::format("tp {} exceeds intermediate_size {} or vocab_size {}", size,
                                            cfg.intermediate_size, cfg.vocab_size));
}

TpSlice tp_slice(const ModelConfig& c, const std::string& name, const std::vector<std::int64_t>& full_shape, int size,
                 int rank) {
  TpSlice s;
  s.end = rows_cols(full_shape).first;
  if (size == 1) return s;
  const std::int64_t hd = c.head_dim();
  auto by_heads = [&](int axis, std::int64_t heads) {
    const auto [b, e] = split_range(heads, size, rank);
    return TpSlice{axis, b * hd, e * hd};
  };
  auto by_units = [&](int axis, std::int64_t units) {
    const auto [b, e] = split_range(units, size, rank);
    return TpSlice{axis, b, e};
  };
  // Column-parallel matrices and their biases are cut along their rows (a bias's elements).
  for (const char* kind : {".weight", ".bias"}) {
    const std::string k(kind);
    if (name.ends_with("self_attn.q_proj" + k)) return by_heads(0, c.num_attention_heads);
    if (name.ends_with("self_attn.k_proj" + k) || name.ends_with("self_attn.v_proj" + k))
      return by_heads(0, c.num_key_value_heads);
    if (name.ends_with("mlp.gate_proj" + k) || name.ends_with("mlp.up_proj" + k))
      return by_units(0, c.intermediate_size);
  }
  if (name.ends_with("self_attn.o_proj.weight")) return by_heads(1, c.num_attention_heads);
  if (name.ends_with("mlp.down_proj.weight")) return by_units(1, c.intermediate_size);
  // LoRA adapters (model/lora.hpp): B of a column-parallel matrix is cut as its rows, A of a
  // row-parallel one as its columns; the other factor (A of q, k, v, gate, up; B of o, down)
  // is replicated.
  if (name.ends_with("self_attn.q_proj.lora_B.weight")) return by_heads(0, c.num_attention_heads);
  if (name.ends_with("self_attn.k_proj.lora_B.weight") || name.ends_with("self_attn.v_proj.lora_B.weight"))
    return by_heads(0, c.num_key_value_heads);
  if (name.ends_with("mlp.gate_proj.lora_B.weight") || name.ends_with("mlp.up_proj.lora_B.weight"))
    return by_units(0, c.intermediate_size);
  if (name.ends_with("self_attn.o_proj.lora_A.weight")) return by_heads(1, c.num_attention_heads);
  if (name.ends_with("mlp.down_proj.lora_A.weight")) return by_units(1, c.intermediate_size);
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return by_units(0, c.vocab_size);
  return s;  // norms (q_norm, k_norm included), the biases of o_proj and down_proj, score: replicated
}

template <typename T>
std::vector<T> extract_slice(const T* full, const std::vector<std::int64_t>& full_shape, const TpSlice& s) {
  const auto [rows, cols] = rows_cols(full_shape);
  if (!s.split()) return std::vector<T>(full, full + rows * cols);
  std::vector<T> out;
  if (s.axis == 0) {
    out.assign(full + s.begin * cols, full + s.end * cols);
  } else {
    const std::int64_t w = s.end - s.begin;
    out.resize(std::size_t(rows * w));
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(full + r * cols + s.begin, w, out.data() + r * w);
  }
  return out;
}

template <typename T>
void insert_slice(T* full, const std::vector<std::int64_t>& full_shape, const TpSlice& s, const T* part) {
  const auto [rows, cols] = rows_cols(full_shape);
  if (!s.split()) {
    std::copy_n(part, rows * cols, full);
  } else if (s.axis == 0) {
    std::copy_n(part, (s.end - s.begin) * cols, full + s.begin * cols);
  } else {
    const std::int64_t w = s.end - s.begin;
    for (std::int64_t r = 0; r < rows; ++r) std::copy_n(part + r * w, w, full + r * cols + s.begin);
  }
}

template <typename T>
void tp_all_reduce(backend::Backend& be, const TensorParallel& tp, T* data, std::int64_t n, bool max) {
  if (tp.size == 1 || n == 0) return;
  if (!tp.group) throw std::logic_error("a tensor-parallel model without its tp group cannot run");
  const comm::ReduceOp op = max ? comm::ReduceOp::max : comm::ReduceOp::sum;
  if (be.host_accessible() || tp.group->takes_device_memory()) {
    // Host memory, or a group that moves device memory itself (comm::device_group: NCCL,
    // or its own staging over MPI).
    tp.group->all_reduce(std::span<T>(data, std::size_t(n)), op);
    return;
  }
  // Device memory and a host-only communicator: stage through the host.
  std::vector<T> host(static_cast<std::size_t>(n));
  be.copy_to_host(host.data(), data, host.size() * sizeof(T));
  tp.group->all_reduce(std::span<T>(host), op);
  be.copy_to_device(data, host.data(), host.size() * sizeof(T));
}

template std::vector<float> extract_slice<float>(const float*, const std::vector<std::int64_t>&, const TpSlice&);
template std::vector<double> extract_slice<double>(const double*, const std::vector<std::int64_t>&, const TpSlice&);
template void insert_slice<float>(float*, const std::vector<std::int64_t>&, const TpSlice&, const float*);
template void insert_slice<double>(double*, const std::vector<std::int64_t>&, const TpSlice&, const double*);
template void tp_all_reduce<float>(backend::Backend&, const TensorParallel&, float*, std::int64_t, bool);
template void tp_all_reduce<double>(backend::Backend&, const TensorParallel&, double*, std::int64_t, bool);

}  // namespace braid::model

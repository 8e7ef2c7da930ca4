#include "checkpoint/whole_tensors.hpp"

#include <cstring>

#include <fmt/format.h>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "model/tensor_parallel.hpp"

namespace braid::checkpoint {
namespace {

// The files of each tp rank, ordered by rank; every file of one kind and one degree.
std::vector<std::vector<std::filesystem::path>> files_by_rank(const std::vector<std::filesystem::path>& files) {
  if (files.empty()) throw UsageError("a checkpoint needs at least one weight file");
  std::map<int, std::vector<std::filesystem::path>> by_rank;
  int degree = 0;
  std::string kind;
  for (const auto& f : files) {
    const io::WeightShardMeta m = io::WeightShardReader(f).meta();
    if (kind.empty()) kind = m.kind;
    if (m.kind != kind) {
      throw InputError(f.string(), "attribute kind",
                       fmt::format("is \"{}\" where {} is \"{}\"", m.kind, files.front().string(), kind));
    }
    if (degree == 0) degree = m.tp_size;
    if (m.tp_size != degree) {
      throw InputError(f.string(), "attribute tp_size",
                       fmt::format("is {} where {} has {}", m.tp_size, files.front().string(), degree));
    }
    by_rank[m.tp_rank].push_back(f);
  }
  std::vector<std::vector<std::filesystem::path>> out;
  for (int r = 0; r < degree; ++r) {
    auto it = by_rank.find(r);
    if (it == by_rank.end()) {
      throw InputError(files.front().string(), "attribute tp_rank",
                       fmt::format("no file of tp rank {} of {} is there", r, degree));
    }
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

WholeTensors::WholeTensors(const std::vector<std::filesystem::path>& files) {
  for (auto& rank_files : files_by_rank(files)) ranks_.emplace_back(rank_files);
  config_ = config_of(ranks_.front());
  const auto names0 = ranks_.front().names();
  for (std::size_t r = 1; r < ranks_.size(); ++r) {
    if (ranks_[r].names() != names0) {
      throw InputError(ranks_[r].shards().front().path().string(), "tensors",
                       fmt::format("tp rank {} holds other tensors than tp rank 0 ({})", r,
                                   ranks_.front().shards().front().path().string()));
    }
  }
}

std::string WholeTensors::parameter_of(const std::string& name) const {
  return kind() == "optimizer" ? name.substr(0, name.rfind('.')) : name;
}

io::Shape WholeTensors::shape(const std::string& name) const {
  io::Shape full = ranks_.front().shape(name);
  if (ranks_.size() == 1) return full;
  const int axis = model::tp_slice(config_, parameter_of(name), full, tp_size(), 0).axis;
  if (axis < 0) return full;
  full[static_cast<std::size_t>(axis)] = 0;
  for (const auto& r : ranks_) full[static_cast<std::size_t>(axis)] += r.shape(name)[static_cast<std::size_t>(axis)];
  return full;
}

std::vector<float> WholeTensors::read(const std::string& name) const {
  if (ranks_.size() == 1) return ranks_.front().read(name);
  const io::Shape full = shape(name);
  const std::string param = parameter_of(name);
  const int n = tp_size();
  std::vector<float> out;
  for (int r = 0; r < n; ++r) {
    const io::WeightShardSet& set = ranks_[static_cast<std::size_t>(r)];
    const model::TpSlice sl = model::tp_slice(config_, param, full, n, r);
    io::Shape want = full;
    if (sl.split()) want[static_cast<std::size_t>(sl.axis)] = sl.end - sl.begin;
    if (set.shape(name) != want) {
      throw InputError(set.holder(name).path().string(), name,
                       fmt::format("slice of shape {} where tp rank {} of {} holds {}", io::shape_string(set.shape(name)),
                                   r, n, io::shape_string(want)));
    }
    std::vector<float> part = set.read(name);
    if (!sl.split()) {
      if (r == 0) {
        out = std::move(part);
      } else if (std::memcmp(part.data(), out.data(), out.size() * sizeof(float)) != 0) {
        throw InputError(set.holder(name).path().string(), name, "replicated tensor differs from tp rank 0's copy");
      }
      continue;
    }
    if (r == 0) out.assign(static_cast<std::size_t>(io::numel(full)), 0.0f);
    model::insert_slice(out.data(), full, sl, part.data());
  }
  return out;
}

std::vector<float> read_as_slice(const WholeTensors& whole, const std::string& name, const io::Shape& full_shape,
                                 const model::TpSlice& slice) {
  const io::Shape shape = whole.shape(name);
  if (shape != full_shape) {
    throw InputError(whole.holder(name).path().string(), name,
                     fmt::format("shape {} where the model needs {}", io::shape_string(shape),
                                 io::shape_string(full_shape)));
  }
  std::vector<float> all = whole.read(name);
  if (!slice.split()) return all;
  return model::extract_slice(all.data(), full_shape, slice);
}

}  // namespace braid::checkpoint

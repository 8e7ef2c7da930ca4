#include "checkpoint/optimizer_state.hpp"

#include "checkpoint/adapters.hpp"
#include "checkpoint/whole_tensors.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace braid::checkpoint {

namespace {

// The copy of a tied embedding on a later stage has no state of its own on disk.
bool is_tied_copy(const model::Model& m, const std::string& name) {
  return name == "model.embed_tokens.weight" && !m.is_first_stage();
}

// Each moment of each tensor the stage owns on disk, in file order:
// fn(tensor, its file name, its moment's n floats on the device).
template <typename Fn>
void for_each_moment(std::span<const Moment> moments, const model::Model& m, Fn&& fn) {
  std::size_t total = 0;
  for (const auto& t : trained_tensors(m)) total += static_cast<std::size_t>(t.numel);
  for (const Moment& moment : moments) {
    if (moment.values.size() != total) {
      throw std::invalid_argument(fmt::format("optimizer moment {} holds {} values where the model has {} parameters",
                                              moment.name, moment.values.size(), total));
    }
  }
  std::size_t offset = 0;
  for (const auto& t : trained_tensors(m)) {
    const auto n = static_cast<std::size_t>(t.numel);
    if (!is_tied_copy(m, t.name)) {
      for (const Moment& moment : moments) {
        fn(t, io::optimizer_tensor_name(t.name, moment.name), moment.values.data() + offset, n);
      }
    }
    offset += n;
  }
}

}  // namespace

std::filesystem::path optimizer_state_path(const std::filesystem::path& checkpoint) {
  std::filesystem::path p = checkpoint;
  p.replace_filename(checkpoint.stem().string() + ".optim" + checkpoint.extension().string());
  return p;
}

void save_optimizer_state(std::span<const Moment> moments, std::int64_t step, const model::Model& m,
                          const std::filesystem::path& path, const SaveInfo& info) {
  io::WeightShardMeta meta;
  meta.kind = "optimizer";
  meta.model_config = info.config_json.empty() ? model::config_to_json(m.config()).dump() : info.config_json;
  meta.layer_begin = m.layer_begin();
  meta.layer_end = m.layer_end();
  meta.has_embedding = m.is_first_stage();
  meta.has_head = m.is_last_stage();
  meta.tp_rank = m.tensor_parallel().rank;   // the moments are of this rank's slices
  meta.tp_size = m.tensor_parallel().size;
  meta.step = step;
  meta.created_by = info.created_by;
  meta.made_from = info.made_from;
  io::WeightShardWriter w(path, meta);
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for_each_moment(moments, m, [&](const auto& t, const std::string& name, const float* moment, std::size_t n) {
    host.resize(n);
    be.copy_to_host(host.data(), moment, n * sizeof(float));
    w.add(name, t.shape, host.data());
  });
  w.commit();
}

std::optional<std::int64_t> load_optimizer_state(std::span<const Moment> moments, const model::Model& m,
                                                 const std::filesystem::path& checkpoint) {
  return load_optimizer_state_file(moments, m, optimizer_state_path(checkpoint));
}

std::optional<std::int64_t> load_optimizer_state_file(std::span<const Moment> moments, const model::Model& m,
                                                      const std::filesystem::path& spec) {
  if (!checkpoint_exists(spec)) return std::nullopt;
  const model::TensorParallel& tp = m.tensor_parallel();
  const auto all = checkpoint_files(spec);
  if (needs_joining(all, tp)) {
    // A state of another tp degree: each moment joined from every rank's slice, cut as the model's.
    const WholeTensors whole(all);
    if (whole.kind() != "optimizer") {
      throw InputError(whole.file().string(), "kind", fmt::format("is \"{}\", expected \"optimizer\"", whole.kind()));
    }
    backend::Backend& be = m.backend();
    for_each_moment(moments, m, [&](const auto& t, const std::string& name, float* moment, std::size_t n) {
      if (!whole.contains(name)) throw InputError(spec.string(), name, "optimizer state is missing this tensor");
      const std::vector<float> part = read_as_slice(whole, name, t.full_shape, t.slice);
      be.copy_to_device(moment, part.data(), n * sizeof(float));
    });
    return whole.meta().step;
  }
  const io::WeightShardSet shards(files_of_tp_rank(all, tp));
  for (const auto& s : shards.shards()) {
    if (s.meta().kind != "optimizer") {
      throw InputError(s.path().string(), "kind", fmt::format("is \"{}\", expected \"optimizer\"", s.meta().kind));
    }
  }
  // The state of the model's own tp slice loads as it is; a whole (tp 1) state loads
  // into any tp rank, each moment read as the rank's slice.
  const io::WeightShardMeta& head = shards.shards().front().meta();
  if (head.tp_size != 1 && (head.tp_size != tp.size || head.tp_rank != tp.rank)) {
    throw InputError(shards.shards().front().path().string(), "attribute tp_size",
                     fmt::format("optimizer state of tp slice {} of {} where the model is slice {} of {} (braid "
                                 "reshard {} --tp {} makes the files of another tp degree)",
                                 head.tp_rank, head.tp_size, tp.rank, tp.size, spec.string(), tp.size));
  }
  const bool slicing = head.tp_size == 1 && tp.size > 1;
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for_each_moment(moments, m, [&](const auto& t, const std::string& name, float* moment, std::size_t n) {
    if (!shards.contains(name)) throw InputError(spec.string(), name, "optimizer state is missing this tensor");
    const auto& holder = shards.holder(name);
    const io::Shape& want = slicing ? t.full_shape : t.shape;
    if (holder.shape(name) != want) {
      throw InputError(holder.path().string(), name,
                       fmt::format("shape {} where the model has {}", io::shape_string(holder.shape(name)),
                                   io::shape_string(want)));
    }
    host.resize(n);
    if (slicing && t.slice.split()) holder.read_slice(name, t.slice.axis, t.slice.begin, t.slice.end, host.data());
    else holder.read(name, host.data());
    be.copy_to_device(moment, host.data(), n * sizeof(float));
  });
  return shards.shards().front().meta().step;
}

}  // namespace braid::checkpoint

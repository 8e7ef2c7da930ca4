#include "checkpoint/optimizer_state.hpp"

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
  for (const auto& t : m.tensors()) total += static_cast<std::size_t>(t.numel);
  for (const Moment& moment : moments) {
    if (moment.values.size() != total) {
      throw std::invalid_argument(fmt::format("optimizer moment {} holds {} values where the model has {} parameters",
                                              moment.name, moment.values.size(), total));
    }
  }
  std::size_t offset = 0;
  for (const auto& t : m.tensors()) {
    const auto n = static_cast<std::size_t>(t.numel);
    if (!is_tied_copy(m, t.name)) {
      for (const Moment& moment : moments) {
        fn(t, io::optimizer_tensor_name(t.name, moment.name), moment.values.data() + offset, n);
      }
    }
    offset += n;
  }
}

bool has_stage_files(const std::filesystem::path& p) {
  try {
    checkpoint_files(p);
    return true;
  } catch (const InputError&) {
    return false;
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
  meta.step = step;
  meta.created_by = info.created_by;
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
  const std::filesystem::path spec = optimizer_state_path(checkpoint);
  if (!has_stage_files(spec)) return std::nullopt;
  const io::WeightShardSet shards(checkpoint_files(spec));
  for (const auto& s : shards.shards()) {
    if (s.meta().kind != "optimizer") {
      throw InputError(s.path().string(), "kind", fmt::format("is \"{}\", expected \"optimizer\"", s.meta().kind));
    }
  }
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for_each_moment(moments, m, [&](const auto& t, const std::string& name, float* moment, std::size_t n) {
    if (!shards.contains(name)) throw InputError(spec.string(), name, "optimizer state is missing this tensor");
    const auto& holder = shards.holder(name);
    if (holder.shape(name) != t.shape) {
      throw InputError(holder.path().string(), name,
                       fmt::format("shape {} where the model has {}", io::shape_string(holder.shape(name)),
                                   io::shape_string(t.shape)));
    }
    host.resize(n);
    holder.read(name, host.data());
    be.copy_to_device(moment, host.data(), n * sizeof(float));
  });
  return shards.shards().front().meta().step;
}

}  // namespace braid::checkpoint

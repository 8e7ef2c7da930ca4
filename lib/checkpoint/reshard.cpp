#include "checkpoint/reshard.hpp"

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "model/tensor_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

namespace braid::checkpoint {

std::vector<std::filesystem::path> reshard(const std::vector<std::filesystem::path>& files,
                                           const std::filesystem::path& out, int tp_size,
                                           const std::string& created_by) {
  if (files.empty()) throw UsageError("reshard: no input files");
  // The input's files by tp rank, each rank's ordered by stage.
  std::map<int, std::vector<io::WeightShardReader>> by_rank;
  int in_tp = 0;
  std::string kind;
  for (const auto& f : files) {
    io::WeightShardReader r(f);
    const io::WeightShardMeta& m = r.meta();
    if (m.kind != "weights" && m.kind != "optimizer")
      throw InputError(f.string(), "attribute kind",
                       fmt::format("is \"{}\": weights or optimizer state are resharded", m.kind));
    if (kind.empty()) kind = m.kind;
    if (m.kind != kind)
      throw InputError(f.string(), "attribute kind", fmt::format("is \"{}\" where {} is \"{}\"", m.kind,
                                                                 files.front().string(), kind));
    if (in_tp == 0) in_tp = m.tp_size;
    if (m.tp_size != in_tp)
      throw InputError(f.string(), "attribute tp_size",
                       fmt::format("is {} where {} has {}", m.tp_size, files.front().string(), in_tp));
    by_rank[m.tp_rank].push_back(std::move(r));
  }
  for (int r = 0; r < in_tp; ++r)
    if (!by_rank.count(r))
      throw InputError(files.front().string(), "attribute tp_rank", fmt::format("no file of tp rank {} of {} given", r, in_tp));
  for (auto& [rank, shards] : by_rank) {
    std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) {
      return a.meta().layer_begin < b.meta().layer_begin ||
             (a.meta().layer_begin == b.meta().layer_begin && a.meta().has_embedding && !b.meta().has_embedding);
    });
    const auto& first = by_rank.at(0);
    if (shards.size() != first.size())
      throw InputError(shards.front().path().string(), "attribute tp_rank",
                       fmt::format("tp rank {} has {} stage files where rank 0 has {}", rank, shards.size(), first.size()));
    for (std::size_t s = 0; s < shards.size(); ++s)
      if (shards[s].meta().layer_begin != first[s].meta().layer_begin ||
          shards[s].meta().layer_end != first[s].meta().layer_end)
        throw InputError(shards[s].path().string(), "attribute layer_begin",
                         fmt::format("layers [{}, {}) where tp rank 0's stage file {} holds [{}, {})",
                                     shards[s].meta().layer_begin, shards[s].meta().layer_end, s,
                                     first[s].meta().layer_begin, first[s].meta().layer_end));
  }
  const auto& lead = by_rank.at(0);
  const std::string origin = lead.front().path().string() + ":model_config";
  if (lead.front().meta().model_config.empty())
    throw InputError(lead.front().path().string(), "model_config", "is empty");
  const model::ModelConfig cfg = model::parse_config(parse_json_text(lead.front().meta().model_config, origin), origin);
  try {
    model::check_tensor_parallel(cfg, tp_size);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("reshard: {}", e.what()));
  }

  std::vector<std::filesystem::path> written;
  const int stages = int(lead.size());
  for (int s = 0; s < stages; ++s) {
    const io::WeightShardReader& head = lead[std::size_t(s)];
    std::vector<io::WeightShardWriter> writers;
    for (int q = 0; q < tp_size; ++q) {
      io::WeightShardMeta meta = head.meta();
      meta.tp_rank = q;
      meta.tp_size = tp_size;
      meta.created_by = created_by;
      writers.emplace_back(stage_path(tp_path(out, q, tp_size), s, stages), meta);
    }
    for (const std::string& name : head.names()) {
      // An optimizer state's "<parameter>.<moment>" is split as its parameter.
      const std::string param = kind == "optimizer" ? name.substr(0, name.rfind('.')) : name;
      // The whole tensor: the input ranks' slices joined along the split axis.
      std::vector<io::Shape> shapes;
      std::vector<std::vector<float>> parts;
      for (int r = 0; r < in_tp; ++r) {
        const io::WeightShardReader& src = by_rank.at(r)[std::size_t(s)];
        if (!src.contains(name)) throw InputError(src.path().string(), name, "tensor of tp rank 0's file is missing here");
        shapes.push_back(src.shape(name));
        parts.push_back(src.read(name));
      }
      const int axis = model::tp_slice(cfg, param, shapes[0], in_tp, 0).axis;
      io::Shape full_shape = shapes[0];
      std::vector<float> full;
      if (axis < 0) {
        for (int r = 1; r < in_tp; ++r)
          if (shapes[std::size_t(r)] != shapes[0] ||
              std::memcmp(parts[std::size_t(r)].data(), parts[0].data(), parts[0].size() * sizeof(float)) != 0)
            throw InputError(by_rank.at(r)[std::size_t(s)].path().string(), name,
                             "replicated tensor differs from tp rank 0's copy");
        full = std::move(parts[0]);
      } else {
        full_shape[std::size_t(axis)] = 0;
        for (const auto& sh : shapes) full_shape[std::size_t(axis)] += sh[std::size_t(axis)];
        full.resize(std::size_t(io::numel(full_shape)));
        for (int r = 0; r < in_tp; ++r) {
          const model::TpSlice sl = model::tp_slice(cfg, param, full_shape, in_tp, r);
          io::Shape want = full_shape;
          want[std::size_t(axis)] = sl.end - sl.begin;
          if (shapes[std::size_t(r)] != want)
            throw InputError(by_rank.at(r)[std::size_t(s)].path().string(), name,
                             fmt::format("slice of shape {} where tp rank {} of {} holds {}",
                                         io::shape_string(shapes[std::size_t(r)]), r, in_tp, io::shape_string(want)));
          model::insert_slice(full.data(), full_shape, sl, parts[std::size_t(r)].data());
        }
      }
      for (int q = 0; q < tp_size; ++q) {
        const model::TpSlice sl = model::tp_slice(cfg, param, full_shape, tp_size, q);
        io::Shape shape = full_shape;
        if (sl.split()) shape[std::size_t(sl.axis)] = sl.end - sl.begin;
        writers[std::size_t(q)].add(name, shape, model::extract_slice(full.data(), full_shape, sl));
      }
    }
    for (auto& w : writers) {
      w.commit();
      written.push_back(w.path());
    }
  }
  return written;
}

}  // namespace braid::checkpoint

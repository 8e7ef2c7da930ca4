#include <fmt/format.h>

#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/inspect_kinds.hpp"
#include "io/weight_shard.hpp"

namespace braid::io::detail {

ordered_json summarize_weights(const std::string& path) {
  const WeightShardReader r(path);
  const auto file = h5::File::open_read(path);
  // The tensors are not otherwise read here: verify every checksum (all mismatches in one error).
  const h5::ChecksumReport sums = file.verify_checksums();
  if (!sums.mismatched.empty()) throw InputError(path, sums.mismatched);
  const auto& m = r.meta();
  ordered_json s;
  s["file"] = path;
  s["kind"] = m.kind;
  s["format"] = kWeightsFormat;
  s["version"] = kWeightsVersion;
  s["step"] = m.step;
  s["layer_begin"] = m.layer_begin;
  s["layer_end"] = m.layer_end;
  s["has_embedding"] = m.has_embedding;
  s["has_head"] = m.has_head;
  s["tp_rank"] = m.tp_rank;
  s["tp_size"] = m.tp_size;
  s["created_by"] = m.created_by;
  s["model_config"] = json_or_text(m.model_config);
  s["made_from"] = json_or_text(m.made_from);
  if (!m.adapter_config.empty()) s["adapter_config"] = json_or_text(m.adapter_config);
  std::int64_t parameters = 0;
  ordered_json tensors = ordered_json::array();
  ordered_json problems = ordered_json::array();   // a NaN or Inf, named by the reader
  std::vector<float> values;
  for (const auto& name : r.names()) {
    const Shape shape = r.shape(name);
    parameters += numel(shape);
    values.resize(static_cast<std::size_t>(numel(shape)));
    try {
      r.read(name, values.data());
    } catch (const InputError& e) {
      problems.push_back(fmt::format("{}: {}", e.field(), e.problems().front()));
    }
    tensors.push_back({{"name", name}, {"shape", shape}, {"dtype", file.dataset_info(name).type_name()}});
  }
  s["tensor_count"] = r.names().size();
  s["parameters"] = parameters;
  s["checksums"] = {{"verified", sums.verified.size()}, {"absent", sums.absent.size()}};
  s["tensors"] = tensors;
  s["problems"] = problems;
  return s;
}

}  // namespace braid::io::detail

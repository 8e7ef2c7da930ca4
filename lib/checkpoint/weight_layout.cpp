#include "checkpoint/weight_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "checkpoint/adapters.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "io/h5.hpp"
#include "io/inspect.hpp"
#include "io/shard_header.hpp"
#include "model/config.hpp"
#include "model/model.hpp"

namespace braid::checkpoint {
namespace {

using Shapes = std::map<std::string, io::Shape>;

// The tensor (or its moment) is in the shard.
bool holds(const io::WeightShardReader& r, const std::string& name) {
  return r.contains(name) || r.contains(io::optimizer_tensor_name(name, "exp_avg"));
}

// The LoRA adapters the shard holds: an adapter file's, as its adapter_config names them; an
// optimizer state's (which records no options) as its moments show them: the modules of
// the lora_A tensors there, the rank of their rows, the value head's when score.weight's are
// there. nullopt for a model's weights or state.
std::optional<model::LoraOptions> adapters_held(const io::WeightShardReader& r) {
  if (r.meta().kind == "adapters") return read_adapter_file(r.path())->lora;
  static const std::string kA = ".lora_A.weight";
  model::LoraOptions lora;
  for (const auto& name : r.names()) {
    const auto at = name.find(kA + ".");
    if (at == std::string::npos) continue;
    const std::string module = name.substr(name.rfind('.', at - 1) + 1, at - name.rfind('.', at - 1) - 1);
    if (std::find(lora.targets.begin(), lora.targets.end(), module) == lora.targets.end()) lora.targets.push_back(module);
    if (lora.rank == 0 && !r.shape(name).empty()) lora.rank = static_cast<int>(r.shape(name).front());
  }
  if (lora.targets.empty()) return std::nullopt;
  // In lora_modules()' order, as the model lays them out.
  std::vector<std::string> ordered;
  for (const auto& m : model::lora_modules()) {
    if (std::find(lora.targets.begin(), lora.targets.end(), m) != lora.targets.end()) ordered.push_back(m);
  }
  lora.targets = ordered;
  lora.value_head = holds(r, "score.weight");   // the value head's copy, trained beside them
  return lora;
}

// The tensors the shard's model and layers call for (its adapters, for an adapter file or
// their optimizer state).
Shapes expected_tensors(const io::WeightShardReader& r, const model::ModelConfig& cfg) {
  const io::WeightShardMeta& meta = r.meta();
  const bool last = meta.layer_end == cfg.num_hidden_layers;
  const bool lm = holds(r, "lm_head.weight") || cfg.tie_word_embeddings;
  const bool value = holds(r, "score.weight");
  model::ModelOptions opt{.layers = {meta.layer_begin, meta.layer_end}, .lm_head = lm, .value_head = value,
                          .value_bias = value && holds(r, "score.bias"), .tp = {meta.tp_size, meta.tp_rank, nullptr}};
  Shapes out;
  if (const auto lora = adapters_held(r)) {
    opt.lora = *lora;
    for (auto& t : model::adapter_layout(cfg, opt)) out[t.name] = io::Shape(t.shape.begin(), t.shape.end());
    return out;
  }
  for (auto& t : model::tensor_layout(cfg, opt)) {
    // A tied last stage's copy of the embedding is written by the first stage only.
    if (t.name == "model.embed_tokens.weight" && meta.layer_begin > 0) continue;
    out[t.name] = io::Shape(t.shape.begin(), t.shape.end());
  }
  if (last && !lm && !value) out["lm_head.weight or score.weight"] = {};
  return out;
}

std::string range(const io::WeightShardMeta& m) { return fmt::format("layers [{}, {})", m.layer_begin, m.layer_end); }

}  // namespace

std::vector<std::string> layout_problems(const io::WeightShardReader& r) {
  const io::WeightShardMeta& meta = r.meta();
  if (meta.model_config.empty()) return {"model_config: is empty: the tensors cannot be checked against a model"};
  model::ModelConfig cfg;
  try {
    const std::string origin = r.path().string() + ":model_config";
    cfg = model::parse_config(parse_json_text(meta.model_config, origin), origin);
  } catch (const InputError& e) {
    return {e.what()};
  }
  if (meta.layer_end <= meta.layer_begin) return {fmt::format("attribute layer_end: {} hold no decoder layer", range(meta))};
  Shapes want;
  try {
    want = expected_tensors(r, cfg);
  } catch (const InputError& e) {
    return {e.what()};   // an adapter file's adapter_config
  } catch (const std::invalid_argument& e) {
    return {fmt::format("model_config: {} (tp slice {} of {})", e.what(), meta.tp_rank, meta.tp_size)};
  }
  std::vector<std::string> problems;
  if (const auto heads = want.find("lm_head.weight or score.weight"); heads != want.end()) {
    problems.push_back(fmt::format("the last layer's file holds no head (lm_head.weight for a policy, score.weight "
                                   "for a critic or reward model, or tie_word_embeddings in model_config)"));
    want.erase(heads);
  }
  const bool optimizer = meta.kind == "optimizer";
  std::map<std::string, std::set<std::string>> moments;   // parameter -> moments found
  std::set<std::string> moment_names;
  for (const auto& name : r.names()) {
    std::string param = name, moment;
    if (optimizer) {
      const auto dot = name.rfind('.');
      param = dot == std::string::npos ? name : name.substr(0, dot);
      moment = dot == std::string::npos ? "" : name.substr(dot + 1);
    }
    const auto it = want.find(param);
    if (it == want.end()) {
      problems.push_back(fmt::format("{}: not a tensor of this model ({} of model_config{}): braid would not load it",
                                     name, range(meta), optimizer ? ", as <parameter>.<moment>" : ""));
      continue;
    }
    if (r.shape(name) != it->second) {
      problems.push_back(fmt::format("{}: shape {} where the model has {}", name, io::shape_string(r.shape(name)),
                                     io::shape_string(it->second)));
    }
    moments[param].insert(moment);
    moment_names.insert(moment);
  }
  for (const auto& [param, shape] : want) {
    const auto found = moments.find(param);
    if (found == moments.end()) {
      problems.push_back(fmt::format("{}: missing ({} of model_config hold it)", param, range(meta)));
    } else if (found->second != moment_names) {
      std::vector<std::string> lacking;
      std::set_difference(moment_names.begin(), moment_names.end(), found->second.begin(), found->second.end(),
                          std::back_inserter(lacking));
      problems.push_back(fmt::format("{}: its moment(s) {} missing", param, fmt::join(lacking, ", ")));
    }
  }
  return problems;
}

std::optional<std::string> check_braid_file(const std::string& path, std::vector<std::string>* notes) {
  if (auto bad = io::check_file(path, notes)) return bad;
  try {
    if (!io::is_weight_shard(path)) return std::nullopt;
    const io::WeightShardReader r(path);
    const auto problems = layout_problems(r);
    if (!problems.empty()) return InputError(path, problems).what();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace braid::checkpoint

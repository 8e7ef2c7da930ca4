#include "plan/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "plan/hardware.hpp"

namespace braid::plan {
namespace {

// Inverse of the standard normal CDF (Acklam's rational approximation, |err| < 1.2e-9).
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - lo) return -normal_quantile(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// Lengths in tokens: at least 1, below 2^31 (docs/formats-plan.md); a larger one is a typo
// that would otherwise become a plan for sequences no device holds.
constexpr double kMaxLength = 2147483647.0;

LengthDist length_from_json(const json& j, Checker& c, const std::string& w) {
  LengthDist d;
  d.kind = c.string(j, w, "dist", {"fixed", "uniform", "lognormal", "samples"}).value_or("fixed");
  const Bounds pos{.min = 1, .max = kMaxLength};
  if (d.kind == "fixed") {
    c.no_unknown_keys(j, w, {"dist", "value"});
    d.value = c.number(j, w, "value", pos).value_or(1);
    d.min = d.max = d.value;
  } else if (d.kind == "uniform") {
    c.no_unknown_keys(j, w, {"dist", "min", "max"});
    d.min = c.number(j, w, "min", pos).value_or(1);
    d.max = c.number(j, w, "max", pos).value_or(1);
    if (d.max < d.min) c.fail(Checker::path(w, "max"), "is below min");
  } else if (d.kind == "lognormal") {
    c.no_unknown_keys(j, w, {"dist", "median", "sigma", "min", "max"});
    d.median = c.number(j, w, "median", pos).value_or(1);
    d.sigma = c.number(j, w, "sigma", {.min = 0, .max = 10}).value_or(1);
    d.min = c.number(j, w, "min", pos, 1).value_or(1);
    d.max = c.number(j, w, "max", pos).value_or(1);
    if (d.max < d.min) c.fail(Checker::path(w, "max"), "is below min");
  } else {
    c.no_unknown_keys(j, w, {"dist", "values"});
    for (const auto& [iw, v] : c.array_items(j, w, "values", 1)) {
      if (!v->is_number() || v->get<double>() < 1 || v->get<double>() > kMaxLength) {
        c.fail(iw, "expected a length in [1, 2147483647]");
        continue;
      }
      d.samples.push_back(v->get<double>());
    }
    std::sort(d.samples.begin(), d.samples.end());
    d.min = d.samples.empty() ? 1 : d.samples.front();
    d.max = d.samples.empty() ? 1 : d.samples.back();
  }
  return d;
}


}  // namespace

double LengthDist::upper() const { return kind == "fixed" ? value : max; }

std::vector<int> LengthDist::quantiles(int n) const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double p = (i + 0.5) / n;
    double v = 0;
    if (kind == "fixed") {
      v = value;
    } else if (kind == "uniform") {
      v = min + p * (max - min);
    } else if (kind == "lognormal") {
      v = std::clamp(median * std::exp(sigma * normal_quantile(p)), min, max);
    } else {
      const double pos = p * static_cast<double>(samples.size() - 1);
      const auto k = static_cast<std::size_t>(pos);
      const double w = pos - static_cast<double>(k);
      v = k + 1 < samples.size() ? samples[k] * (1 - w) + samples[k + 1] * w : samples.back();
    }
    out.push_back(std::max(1, static_cast<int>(std::lround(v))));
  }
  std::sort(out.begin(), out.end());
  return out;
}

const ExperimentModel* Experiment::model(std::string_view role) const {
  for (const auto& m : models) {
    if (m.role == role) return &m;
  }
  return nullptr;
}

Experiment experiment_from_json(const json& doc, const std::string& file) {
  Checker c(file);
  Experiment e;
  e.file = file;
  c.format(doc, "braid.experiment", 1);
  c.no_unknown_keys(doc, "", {"format", "version", "name", "algorithm", "models", "batch", "prompt_len",
                              "response_len", "ppo_epochs", "train"});
  c.string(doc, "", "name", {}, "");  // free text, but text
  const std::string algo = c.string(doc, "", "algorithm", {"ppo", "grpo"}).value_or("ppo");
  e.algorithm = algo == "grpo" ? Algorithm::grpo : Algorithm::ppo;
  e.ppo_epochs = static_cast<int>(c.integer(doc, "", "ppo_epochs", {.min = 1, .max = 64}, 1).value_or(1));

  const std::vector<std::string> roles = e.algorithm == Algorithm::ppo
                                             ? std::vector<std::string>{"actor", "critic", "ref", "reward"}
                                             : std::vector<std::string>{"actor", "ref", "reward"};
  const json& models = c.object(doc, "", "models");
  c.no_unknown_keys(models, "models", roles);
  const std::filesystem::path base =
      file == "-" ? std::filesystem::current_path() : std::filesystem::path(file).parent_path();
  for (const auto& role : roles) {
    const std::string w = "models." + role;
    const json& m = c.object(models, "models", role.c_str());
    if (!m.is_object()) continue;
    c.no_unknown_keys(m, w, {"config", "name"});
    ExperimentModel em;
    em.role = role;
    const json* cfg = m.contains("config") ? &m["config"] : nullptr;
    json loaded;
    std::string cfg_where = Checker::path(w, "config");
    if (cfg == nullptr) {
      c.fail(cfg_where, "missing (required): a path to an HF config.json or the config object");
      continue;
    }
    if (cfg->is_string()) {
      std::filesystem::path p = cfg->get<std::string>();
      if (p.is_relative()) p = base / p;
      try {
        loaded = load_json_file(p.string());
      } catch (const InputError& err) {
        c.fail(cfg_where, err.what());
        continue;
      }
      cfg = &loaded;
      cfg_where += fmt::format(" ({})", p.string());
      if (std::find(e.config_files.begin(), e.config_files.end(), p.string()) == e.config_files.end()) {
        e.config_files.push_back(p.string());
      }
    } else if (!cfg->is_object()) {
      c.fail(cfg_where, "expected a path to an HF config.json or the config object, found " +
                            std::string(cfg->type_name()));
      continue;
    }
    em.shape = shape_from_hf_config(*cfg, c, cfg_where);
    em.shape.value_head = role == "critic" || role == "reward";
    em.shape.name = c.string(m, w, "name", {}, cfg->contains("_name_or_path") && (*cfg)["_name_or_path"].is_string()
                                                 ? (*cfg)["_name_or_path"].get<std::string>()
                                                 : role).value_or(role);
    e.models.push_back(std::move(em));
  }

  const json& batch = c.object(doc, "", "batch");
  c.no_unknown_keys(batch, "batch", {"global", "mini", "micro"});
  e.global_batch = static_cast<int>(c.integer(batch, "batch", "global", {.min = 1}).value_or(1));
  e.mini_batch = static_cast<int>(c.integer(batch, "batch", "mini", {.min = 1}).value_or(1));
  if (auto micro = c.integer(batch, "batch", "micro", {.min = 1}, 0); micro && *micro > 0) {
    e.micro_batch = static_cast<int>(*micro);
  }
  if (e.global_batch % e.mini_batch != 0) {
    c.fail("batch.mini", fmt::format("{} does not divide the global batch {}", e.mini_batch, e.global_batch));
  }
  if (e.micro_batch && e.mini_batch % *e.micro_batch != 0) {
    c.fail("batch.micro", fmt::format("{} does not divide the mini-batch {}", *e.micro_batch, e.mini_batch));
  }
  if (doc.contains("train")) {
    const json& train = c.object(doc, "", "train");
    c.no_unknown_keys(train, "train", {"lora_rank", "recompute"});
    e.train.lora_rank =
        static_cast<int>(c.integer(train, "train", "lora_rank", {.min = 0, .max = 65536}, 0).value_or(0));
    if (train.contains("recompute") && train["recompute"].is_string()) {
      e.train.recompute_auto = c.string(train, "train", "recompute", {"auto"}).has_value();
    } else {
      e.train.recompute =
          static_cast<int>(c.integer(train, "train", "recompute", {.min = 0, .max = 1 << 20}, 0).value_or(0));
    }
  }
  e.prompt_len = length_from_json(c.object(doc, "", "prompt_len"), c, "prompt_len");
  e.response_len = length_from_json(c.object(doc, "", "response_len"), c, "response_len");
  c.check();
  return e;
}

Experiment load_experiment(const std::string& file) { return experiment_from_json(load_json_file(file), file); }

Cluster cluster_from_json(const json& doc, const std::string& file) {
  Checker c(file);
  Cluster cl;
  c.format(doc, "braid.cluster", 1);
  c.no_unknown_keys(doc, "", {"format", "version", "name", "nodes", "devices_per_node", "device_memory_gb",
                              "intra_node_gbs", "inter_node_gbs", "memory_reserve"});
  cl.nodes = static_cast<int>(c.integer(doc, "", "nodes", {.min = 1, .max = 4096}).value_or(1));
  cl.devices_per_node = static_cast<int>(c.integer(doc, "", "devices_per_node", {.min = 1, .max = 64}).value_or(1));
  c.string(doc, "", "name", {}, "");  // free text, but text
  // Optional overrides of the profile's hardware, within the hardware's bounds (hardware.hpp).
  const auto most = [](double v) { return Bounds{.min = 0, .max = v, .exclusive_min = true}; };
  if (auto v = c.number(doc, "", "device_memory_gb", most(kMaxMemoryGb), 0); v && *v > 0) cl.device_memory = *v * 1e9;
  if (auto v = c.number(doc, "", "intra_node_gbs", most(kMaxGbs), 0); v && *v > 0) cl.intra_bandwidth = *v * 1e9;
  if (auto v = c.number(doc, "", "inter_node_gbs", most(kMaxGbs), 0); v && *v > 0) cl.inter_bandwidth = *v * 1e9;
  cl.memory_reserve = c.number(doc, "", "memory_reserve", {.min = 0, .max = 0.9}, 0.05).value_or(0.05);
  const int d = cl.devices_per_node;
  if (d > 0 && (d & (d - 1)) != 0) c.fail("devices_per_node", "must be a power of two (meshes split nodes in halves)");
  c.check();
  return cl;
}

Cluster load_cluster(const std::string& file) { return cluster_from_json(load_json_file(file), file); }

}  // namespace braid::plan

// The inputs of a plan: the experiment ("braid.experiment": the models by HF
// config, the algorithm, batch sizes, length distributions) and the cluster
// ("braid.cluster": nodes x devices, and what differs from the profile's
// hardware). Lengths are turned into a deterministic batch of sample lengths
// at evenly spaced quantiles, so a plan never depends on a random draw.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "plan/model_shape.hpp"

namespace braid::plan {

enum class Algorithm { ppo, grpo };

struct LengthDist {
  std::string kind = "fixed";  // fixed | uniform | lognormal | samples
  double value = 0;            // fixed
  double min = 1, max = 1;     // uniform; lognormal truncation
  double median = 1, sigma = 1;  // lognormal
  std::vector<double> samples;   // samples (empirical)

  // n lengths at quantiles (i + 0.5) / n, rounded, in [1, max], ascending.
  std::vector<int> quantiles(int n) const;
  double upper() const;  // the longest possible length
};

struct ExperimentModel {
  std::string role;  // actor, critic, ref, reward
  ModelShape shape;
};

// How the trained models (actor, critic) train, as braid-train's flags say: LoRA adapters of
// a rank on every linear layer (the base frozen: gradients and AdamW state for the adapters,
// and a critic's value head, alone) and activation recomputation (every k-th layer keeps only
// its input; "auto": the plan chooses, per training call, between none and every layer).
struct TrainSettings {
  int lora_rank = 0;             // 0: every weight trained
  int recompute = 0;             // braid-train --recompute K
  bool recompute_auto = false;   // the plan picks 0 or 1 per training call
};

struct Experiment {
  std::string file;
  Algorithm algorithm = Algorithm::ppo;
  std::vector<ExperimentModel> models;
  int global_batch = 512;        // samples per iteration
  int mini_batch = 64;           // samples per optimizer step
  std::optional<int> micro_batch;  // samples per training micro-batch; searched when absent
  int ppo_epochs = 1;
  TrainSettings train;
  LengthDist prompt_len, response_len;
  std::vector<std::string> config_files;  // the models' config.json files it names (what made a plan of it)

  const ExperimentModel* model(std::string_view role) const;
};

Experiment experiment_from_json(const json& doc, const std::string& file);
Experiment load_experiment(const std::string& file);

struct Cluster {
  int nodes = 1;
  int devices_per_node = 8;
  std::optional<double> device_memory;    // bytes; else the profile's hardware
  std::optional<double> intra_bandwidth;  // bytes/s; else the profile's
  std::optional<double> inter_bandwidth;
  double memory_reserve = 0.05;           // fraction of memory kept free (allocator, buffers)
  int devices() const { return nodes * devices_per_node; }
};

Cluster cluster_from_json(const json& doc, const std::string& file);
Cluster load_cluster(const std::string& file);

}  // namespace braid::plan

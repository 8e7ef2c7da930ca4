// What the fused-pipeline tests and the benchmark share: a random actor and critic
// checkpoint, a mini-batch of scored samples, and a fused schedule made by the
// schedule library the way braid-schedgen makes it (through its JSON file form).
#pragma once

#include "io/sample_batch.hpp"
#include "model/config.hpp"
#include "sched/schedule_json.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace braid::test {

// Writes actor.h5 (LM head) and critic.h5 (value head, no LM head) under dir.
void write_actor_critic(const model::ModelConfig& cfg, const std::filesystem::path& dir, std::uint64_t seed);

// `sequences` samples with prompt and response lengths in [lo, hi], every array PPO
// training reads (logprobs_actor near a random model's, advantages, values, returns).
io::SampleBatch scored_samples(int sequences, int lo, int hi, int vocab, std::uint64_t seed);

struct FusedModels {
  int devices = 1;
  int actor_stages = 1, critic_stages = 1;   // critic replicas = devices / critic_stages
  int micro_batches = 4;                     // global: per actor replica (one), critic K x M
  double fwd = 1, bwd = 2;
};
// "greedy" or "1f1b" start order, lowered, written as braid.schedule JSON and read back.
sched::LoadedSchedule fused_schedule(const FusedModels& m, const std::string& order = "greedy");
std::string schedspec_json(const FusedModels& m);
// The braid.schedule document itself, as braid-schedgen would write it.
std::string fused_schedule_json(const FusedModels& m, const std::string& order = "greedy");

}  // namespace braid::test

// Run files for the driver tests, written into the test's scratch folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/scratch.hpp"

namespace braid::test {

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A folder "<name>/" with config.json, prompts.jsonl and run.json (the given text).
inline std::filesystem::path run_folder(const std::string& name, const std::string& run_json) {
  const auto dir = scratch(name);
  std::filesystem::remove_all(dir);
  write_file(dir / "models" / "config.json", "{}");
  write_file(dir / "prompts.jsonl", "{\"text\": \"1 2 3\"}\n");
  write_file(dir / "run.json", run_json);
  return dir / "run.json";
}

// A run folder (run_folder) whose PPO run of `iterations` trains with the fused schedule
// schedule.json beside it, of the given spec ({"devices": 2, "models": [...]}).
inline std::filesystem::path scheduled_run_folder(const std::string& name, int iterations, const std::string& spec) {
  const auto run = run_folder(name, R"({"format": "braid.run", "version": 1,
    "models": {"actor": {"init": {"config": "models/config.json"}}, "critic": {"init": {"config": "models/config.json"}},
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": )" + std::to_string(iterations) +
                                         R"(, "train": {"schedule": "schedule.json"}})");
  write_file(run.parent_path() / "schedule.json", R"({"format": "braid.schedule", "version": 1, "spec": )" + spec + "}");
  return run;
}

inline const char* kGoodPpoRun = R"({
  "format": "braid.run", "version": 1,
  "algorithm": "ppo",
  "models": {
    "actor": {"init": {"config": "models/config.json", "seed": 1}},
    "critic": {"init": {"config": "models/config.json", "seed": 2}},
    "reward": {"rule": "digits"}
  },
  "prompts": "prompts.jsonl",
  "iterations": 2,
  "seed": 7,
  "threads": 2,
  "generate": {"samples_per_prompt": 4, "max_new_tokens": 16, "temperature": 0.9},
  "score": {"kl_coef": 0.02},
  "train": {"lr": 0.001, "critic_lr": 0.002, "epochs": 2}
})";

}  // namespace braid::test

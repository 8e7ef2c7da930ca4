// Plans RLHFuse's §7 settings on 32 x 8 H100 (analytic profile) with and
// without stage fusion and prints, per setting: the search's wall time, the
// best unfused and fused iteration times, and the speedups RLHFuse reports in
// Figures 7-9 (end to end; generation+inference and training stages; the
// fused generation+inference time over the migration ratio R_t / batch).
//
//   bench_meshplan EXAMPLES_DIR [TIME_LIMIT_S] [SETTING...]
//   SETTING: actor/critic sizes and max length, e.g. 65b/33b/1024 (default: all 12)
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "plan/analytic_profile.hpp"
#include "plan/search.hpp"

using namespace braid::plan;

namespace {

struct Setting {
  std::string actor, critic;
  int max_len;
};

Experiment make_experiment(const std::string& dir, const Setting& s) {
  // The paper's batch settings: global 512, mini 64; HH-RLHF prompts; long-tailed responses.
  const auto doc = braid::json::parse(fmt::format(R"({{
    "format": "braid.experiment", "version": 1, "algorithm": "ppo",
    "models": {{"actor": {{"config": "models/llama-{0}.json"}}, "ref": {{"config": "models/llama-{0}.json"}},
               "critic": {{"config": "models/llama-{1}.json"}}, "reward": {{"config": "models/llama-{1}.json"}}}},
    "batch": {{"global": 512, "mini": 64}},
    "prompt_len": {{"dist": "uniform", "min": 64, "max": 512}},
    "response_len": {{"dist": "lognormal", "median": {2}, "sigma": 1.0, "max": {3}}}
  }})", s.actor, s.critic, s.max_len * 160 / 1024, s.max_len));
  return experiment_from_json(doc, dir + "/bench.json");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_meshplan EXAMPLES_DIR [TIME_LIMIT_S] [actor/critic/maxlen ...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double limit = argc > 2 ? std::stod(argv[2]) : 20.0;
  std::vector<Setting> settings;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const auto p1 = a.find('/'), p2 = a.rfind('/');
    settings.push_back({a.substr(0, p1), a.substr(p1 + 1, p2 - p1 - 1), std::stoi(a.substr(p2 + 1))});
  }
  if (settings.empty()) {
    for (int len : {512, 1024, 2048}) {
      for (auto [a, c] : {std::pair{"13b", "33b"}, {"33b", "13b"}, {"33b", "65b"}, {"65b", "33b"}}) {
        settings.push_back({a, c, len});
      }
    }
  }
  Cluster cluster;
  cluster.nodes = 32;
  cluster.devices_per_node = 8;
  cluster.device_memory = 80e9;
  fmt::print("# 32 x 8 H100 (analytic), global batch 512, mini-batch 64; search time limit {} s\n", limit);
  fmt::print("# setting            search_s  plans   unfused_s  fused_s  e2e   same-plan  gen+inf  train  R_t/B  m\n");
  fmt::print("# e2e, gen+inf, train: best unfused plan / best fused plan; same-plan: the fused plan run unfused / fused\n");
  for (const auto& s : settings) {
    const Experiment e = make_experiment(dir, s);
    std::vector<ModelShape> shapes;
    for (const auto& m : e.models) shapes.push_back(m.shape);
    const Profile prof = analytic_profile(hardware_preset("h100"), shapes);
    const CostModel cm(e, prof, cluster);
    SearchOptions o;
    o.method = "mh";
    o.time_limit_s = limit;
    o.progress = false;
    const PlanSpace unfused_space(cm, {false, false, std::nullopt});
    const SearchResult unfused = search_plan(unfused_space, o);
    const auto t0 = std::chrono::steady_clock::now();
    const PlanSpace fused_space(cm, {true, true, std::nullopt});
    const SearchResult fused = search_plan(fused_space, o);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Evaluation& f = fused.eval;
    // Stage speedups as RLHFuse's Figure 8 shows them: the unfused plan's stage
    // times (RLHFuse-Base) over the fused plan's.
    const Breakdown& ub = unfused.eval.serial_breakdown;
    const Breakdown& fb = f.fused_breakdown;
    const double gi = (ub.generation + ub.inference) / (fb.generation + fb.inference);
    const double tr = ub.training / fb.training;
    fmt::print("{:>4}/{:<4} len {:<5}  {:8.1f}  {:6}  {:9.1f}  {:7.1f}  {:4.2f}  {:9.2f}  {:7.2f}  {:5.2f}  {:5.2f}  {}{}\n",
               s.actor, s.critic, s.max_len, wall, fused.evaluated, unfused.eval.time, f.time,
               unfused.eval.time / f.time, f.serial / f.fused, gi, tr,
               static_cast<double>(f.inter.r_t) / e.global_batch, f.inter.m, f.oom || unfused.eval.oom ? " OOM" : "");
    std::string curve;
    for (const auto& [rt, t] : f.inter.curve) curve += fmt::format(" {:.2f}:{:.1f}", static_cast<double>(rt) / e.global_batch, t);
    fmt::print("#   gen+inf serial {:.1f} s; fused over R_t/B:{}\n", f.inter.serial, curve);
    std::fflush(stdout);
  }
  return 0;
}

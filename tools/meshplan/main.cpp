// braid-meshplan: a device mesh and 3D-parallel strategy per model function
// call, with stage fusion, predicted iteration time and memory -> plan.json.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "io/fingerprint.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/hardware.hpp"
#include "plan/plan_output.hpp"
#include "sched/schedule_json.hpp"

namespace {

struct Options {
  std::string experiment;
  std::string cluster;
  std::string profile;
  std::string hardware;
  std::string output = "plan.json";
  std::string schedule;
  std::string search = "auto";
  double time_limit = 20;
  long iterations = 200000;
  std::uint64_t seed = 1;
  int max_micro = 32;
  bool no_inter = false, no_intra = false;
  std::vector<std::string> fix;
};

// A schedule (braid-schedgen's) read with every field checked, as --verify reads it.
std::optional<braid::plan::KnownSchedule> load_schedule(const std::string& file) {
  if (file.empty()) return std::nullopt;
  const braid::json doc = braid::load_json_file(file);
  const braid::sched::LoadedSchedule s = braid::sched::load_schedule(doc, file);
  return braid::plan::KnownSchedule{s.makespan, doc["spec"]};
}

// What made a plan: its options, and every file it read by content (the experiment, the
// models' configs it names, the cluster, the profile or hardware file, a schedule).
braid::ordered_json plan_record(const Options& o, const CLI::App& app, const braid::plan::Experiment& exp) {
  const std::vector<std::string> inputs = {"experiment", "cluster", "--profile", "--hardware", "--schedule"};
  std::vector<std::string> not_recorded = inputs;
  not_recorded.insert(not_recorded.end(), {"--output", "--quiet", "--verbose", "--version"});
  braid::io::MadeFrom m("braid-meshplan");
  m.set_options(braid::cli::option_values(app, not_recorded), braid::cli::options_given(app, not_recorded));
  m.add_input_path("experiment", o.experiment);
  std::vector<std::filesystem::path> configs(exp.config_files.begin(), exp.config_files.end());
  if (!configs.empty()) m.add_input("model configs", configs);
  m.add_input_path("cluster", o.cluster);
  if (!o.profile.empty()) m.add_input_path("profile", o.profile);
  const auto presets = braid::plan::hardware_preset_names();
  if (!o.hardware.empty()) {
    if (std::find(presets.begin(), presets.end(), o.hardware) != presets.end()) {
      m.add_input_value("hardware", o.hardware);
    } else {
      m.add_input_path("hardware", o.hardware);
    }
  }
  if (!o.schedule.empty()) m.add_input_path("schedule", o.schedule);
  return m.to_json();
}

int run(const Options& o, const CLI::App& app) {
  using namespace braid::plan;
  const Experiment exp = load_experiment(o.experiment);
  const Cluster cluster = load_cluster(o.cluster);
  Profile profile;
  PlanInputs in{o.experiment, o.cluster, o.profile, "", ""};
  if (!o.profile.empty()) {
    profile = load_profile(o.profile);
  } else {
    std::vector<ModelShape> shapes;
    for (const auto& m : exp.models) shapes.push_back(m.shape);
    profile = analytic_profile(load_hardware(o.hardware), shapes);
    in.profile = "analytic:" + o.hardware;
  }
  if (profile.hardware.devices_per_node != cluster.devices_per_node) {
    braid::log::warn("the profile's hardware has {} devices per node, the cluster {}; using the cluster's",
                     profile.hardware.devices_per_node, cluster.devices_per_node);
  }
  in.profile_source = profile.source;
  in.hardware = profile.hardware.name;
  CostModel cm(exp, profile, cluster);
  cm.set_max_micro(o.max_micro);
  FusionSettings fusion{!o.no_inter, !o.no_intra, load_schedule(o.schedule)};
  std::vector<Pin> pins;
  for (const auto& f : o.fix) pins.push_back(parse_pin(f));
  const PlanSpace space(cm, fusion, pins);
  braid::log::info("{} calls on {} x {} devices, {} meshes, {:.3g} plans", space.calls().size(), cluster.nodes,
                   cluster.devices_per_node, space.meshes().size(), space.plan_count());
  SearchOptions so;
  so.method = o.search;
  so.time_limit_s = o.time_limit;
  so.max_iterations = o.iterations;
  so.seed = o.seed;
  so.progress = braid::log::level() >= braid::log::Level::info;
  const SearchResult r = search_plan(space, so);
  braid::log::info("{} search: {} plans costed in {:.2f} s", r.method, r.evaluated, r.seconds);
  if (fusion.schedule && r.eval.intra.source != "schedule") {
    braid::log::warn("{} was made for another fused training spec than this plan's; its training time is the lower bound",
                     o.schedule);
  }
  braid::ordered_json doc = plan_to_json(space, r, in);
  doc["made_from"] = plan_record(o, app, exp);
  braid::write_text_file(o.output, doc.dump(2) + "\n");
  if (o.output != "-") fmt::print("{}\n", plan_summary(space, r));
  if (r.eval.oom) {
    braid::log::error("no plan found fits in device memory: peak {:.1f} GB on device {}, usable {:.1f} GB",
                      r.eval.peak_memory / 1e9, r.eval.peak_device, cm.device_memory() / 1e9);
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Plans an RLHF iteration: a device mesh and (dp, tp, pp, micro-batches) per model function call,\n"
      "searched with Metropolis-Hastings over a profile-based cost model (or enumerated when the space is\n"
      "small), with inter-stage (generation/inference) and intra-stage (actor/critic training) fusion.\n"
      "Writes plan.json and prints a one-line summary on stdout.",
      "braid-meshplan"};
  Options o;
  app.add_option("experiment", o.experiment, "experiment JSON (braid.experiment)")->required();
  app.add_option("cluster", o.cluster, "cluster JSON (braid.cluster)")->required();
  auto* prof = app.add_option("-p,--profile", o.profile, "profile.json from braid-profile");
  auto* hw = app.add_option("--hardware", o.hardware, "analytic profile for this hardware instead: h100, h200 or a JSON file");
  prof->excludes(hw);
  app.add_option("-o,--output", o.output, "plan file ('-': stdout, then no summary)")->capture_default_str();
  app.add_option("--schedule", o.schedule, "braid.schedule (from braid-schedgen): its makespan (ms) is the fused training step time of plans with its spec");
  app.add_option("--search", o.search, "auto (enumerate small spaces), mh or exhaustive")
      ->check(CLI::IsMember({"auto", "mh", "exhaustive"}))
      ->capture_default_str();
  app.add_option("--time-limit", o.time_limit, "seconds of search: three quarters Metropolis-Hastings, the rest a final descent")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--iterations", o.iterations, "Metropolis-Hastings proposals at most")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-micro", o.max_micro, "most micro-batches of a generation or inference call (powers of two up to this)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed of the search")->capture_default_str();
  app.add_flag("--no-inter-fusion", o.no_inter, "plan without generation/inference fusion");
  app.add_flag("--no-intra-fusion", o.no_intra, "plan without fused actor/critic training");
  app.add_option("--fix", o.fix,
                 "fix the strategy of some calls, NAME=dDtTpP[xM] (NAME a call, e.g. actor_train; a kind: generate, "
                 "inference, train; or all); repeatable, e.g. --fix train=d1t1p2 --fix generate=d1t2p1");
  app.footer("Exit status: 0 plan found; 2 bad input or command line; 3 even the best plan found exceeds device\n"
             "memory (the plan is still written). Formats: docs/formats-plan.md; how it plans: docs/tools/meshplan.md.");
  return braid::cli::run(app, argc, argv, [&] {
    if (o.profile.empty() && o.hardware.empty()) throw braid::UsageError("give --profile FILE or --hardware h100|h200|FILE");
    return run(o, app);
  });
}

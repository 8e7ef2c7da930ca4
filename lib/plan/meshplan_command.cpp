#include "plan/meshplan_command.hpp"

#include <optional>

#include <fmt/format.h>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "io/fingerprint.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/hardware.hpp"
#include "plan/made_from.hpp"
#include "plan/plan_output.hpp"
#include "sched/schedule_json.hpp"

namespace braid::plan {
namespace {

using cli::field;
using cli::kMaxCount;
using namespace cli::option_types;
using O = MeshplanOptions;

// A schedule (braid-schedgen's) read with every field checked, as --verify reads it.
std::optional<KnownSchedule> load_schedule(const std::string& file) {
  if (file.empty()) return std::nullopt;
  const json doc = load_json_file(file);
  const sched::LoadedSchedule s = sched::load_schedule(doc, file);
  return KnownSchedule{s.makespan, doc["spec"]};
}

// What made a plan: its options, and every file it read by content (the experiment, the
// models' configs it names, the cluster, the profile or hardware file, a schedule).
ordered_json plan_record(const CLI::App& app, const MeshplanOptions& o) {
  const std::vector<std::string> not_recorded = {"experiment", "cluster", "--profile", "--hardware", "--schedule",
                                                 "--output",   "--quiet", "--verbose", "--version"};
  io::MadeFrom m("braid-meshplan");
  m.set_options(cli::option_values(app, not_recorded), cli::options_given(app, not_recorded));
  add_experiment_input(m, o.experiment);
  m.add_input_path("cluster", o.cluster);
  if (!o.profile.empty()) m.add_input_path("profile", o.profile);
  if (!o.hardware.empty()) add_hardware_input(m, o.hardware);
  if (!o.schedule.empty()) m.add_input_path("schedule", o.schedule);
  return m.to_json();
}

}  // namespace

const cli::OptionSchema<MeshplanOptions>& meshplan_schema() {
  static const cli::OptionSchema<O> s = {
      field<O>(&O::experiment, {.flag = "experiment", .type = path, .help = "experiment JSON (braid.experiment)",
                                .required = true, .show_default = false,
                                .doc = "`braid.experiment` JSON (docs/formats-plan.md)"}),
      field<O>(&O::cluster, {.flag = "cluster", .type = path, .help = "cluster JSON (braid.cluster)", .required = true,
                             .show_default = false, .doc = "`braid.cluster` JSON (docs/formats-plan.md)"}),
      field<O>(&O::profile, {.flag = "-p,--profile", .type = path, .help = "profile.json from braid-profile",
                             .show_default = false,
                             .doc = "a `braid.profile` from braid-profile (this or `--hardware`)"}),
      field<O>(&O::hardware, {.flag = "--hardware", .type = text,
                              .help = "analytic profile for this hardware instead: h100, h200 or a JSON file",
                              .show_default = false,
                              .doc = "instead of `--profile`: the analytic profile of this hardware (`h100`, `h200` or a "
                                     "hardware JSON file), built in memory"}),
      field<O>(&O::output, {.flag = "-o,--output", .type = path, .help = "plan file ('-': stdout, then no summary)",
                            .doc = "the plan (`-`: stdout, and then no summary line)"}),
      field<O>(&O::schedule, {.flag = "--schedule", .type = path,
                              .help = "braid.schedule (from braid-schedgen): its makespan (ms) is the fused training "
                                      "step time of plans with its spec",
                              .show_default = false,
                              .doc = "a `braid.schedule` from braid-schedgen: its makespan is the fused training step "
                                     "of the plans whose fused training emits exactly its spec (below)"}),
      field<O>([](O& o) -> auto& { return o.search.method; },
               {.flag = "--search", .type = choice, .help = "auto (enumerate small spaces), mh or exhaustive",
                .choices = {"auto", "mh", "exhaustive"},
                .doc = "`auto` (enumerate spaces of at most 2·10⁵ plans, else `mh`), `mh` (Metropolis–Hastings), "
                       "`exhaustive`"}),
      field<O>([](O& o) -> auto& { return o.search.time_limit_s; },
               {.flag = "--time-limit", .type = number,
                .help = "seconds of search: three quarters Metropolis-Hastings, the rest a final descent",
                .bounds = {.min = 0, .exclusive_min = true}}),
      field<O>([](O& o) -> auto& { return o.search.max_iterations; },
               {.flag = "--iterations", .type = integer, .help = "Metropolis-Hastings proposals at most",
                .bounds = {.min = 1}}),
      field<O>(&O::max_micro, {.flag = "--max-micro", .type = integer,
                               .help = "most micro-batches of a generation or inference call (powers of two up to this)",
                               .bounds = {.min = 1, .max = kMaxCount}}),
      field<O>([](O& o) -> auto& { return o.search.seed; },
               {.flag = "--seed", .type = integer, .help = "random seed of the search", .bounds = {.min = 0}}),
      field<O>(&O::no_inter_fusion, {.flag = "--no-inter-fusion", .type = boolean,
                                     .help = "plan without generation/inference fusion", .show_default = false}),
      field<O>(&O::no_intra_fusion, {.flag = "--no-intra-fusion", .type = boolean,
                                     .help = "plan without fused actor/critic training", .show_default = false}),
      field<O>(&O::fix, {.flag = "--fix", .type = text,
                         .help = "fix the strategy of some calls, NAME=dDtTpP[xM] (NAME a call, e.g. actor_train; a "
                                 "kind: generate, inference, train; or all); repeatable, e.g. --fix train=d1t1p2 --fix "
                                 "generate=d1t2p1",
                         .show_default = false,
                         .doc = "keep only the matching strategies of some calls (below): NAME=dDtTpP[xM], NAME a call "
                                "(`actor_train`), a kind (`generate`, `inference`, `train`) or `all`; repeatable"}),
  };
  return s;
}

int run_meshplan(const CLI::App& app, const MeshplanOptions& o) {
  if (o.profile.empty() == o.hardware.empty()) {
    throw UsageError(o.profile.empty() ? "give --profile FILE or --hardware h100|h200|FILE"
                                       : "give --profile FILE or --hardware h100|h200|FILE, not both");
  }
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
    log::warn("the profile's hardware has {} devices per node, the cluster {}; using the cluster's",
              profile.hardware.devices_per_node, cluster.devices_per_node);
  }
  in.profile_source = profile.source;
  in.hardware = profile.hardware.name;
  CostModel cm(exp, profile, cluster);
  cm.set_max_micro(o.max_micro);
  FusionSettings fusion{!o.no_inter_fusion, !o.no_intra_fusion, load_schedule(o.schedule)};
  std::vector<Pin> pins;
  for (const auto& f : o.fix) pins.push_back(parse_pin(f));
  const PlanSpace space(cm, fusion, pins);
  log::info("{} calls on {} x {} devices, {} meshes, {:.3g} plans", space.calls().size(), cluster.nodes,
            cluster.devices_per_node, space.meshes().size(), space.plan_count());
  SearchOptions so = o.search;
  so.progress = log::level() >= log::Level::info;
  const SearchResult r = search_plan(space, so);
  log::info("{} search: {} plans costed in {:.2f} s", r.method, r.evaluated, r.seconds);
  if (fusion.schedule && r.eval.intra.source != "schedule") {
    log::warn("{} was made for another fused training spec than this plan's; its training time is the lower bound",
              o.schedule);
  }
  ordered_json doc = plan_to_json(space, r, in);
  doc["made_from"] = plan_record(app, o);
  write_text_file(o.output, doc.dump(2) + "\n");
  if (o.output != "-") fmt::print("{}\n", plan_summary(space, r));
  if (r.eval.oom) {
    log::error("no plan found fits in device memory: peak {:.1f} GB on device {}, usable {:.1f} GB",
               r.eval.peak_memory / 1e9, r.eval.peak_device, cm.device_memory() / 1e9);
    return 3;
  }
  return 0;
}

}  // namespace braid::plan

#include "sched/option_schema.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace braid::sched {
namespace {

using cli::field;
using namespace cli::option_types;
using A = AnnealOptions;
using O = SchedgenOptions;

// The bounds of a count: the most a schedule's reader takes back (anneal.hpp).
constexpr Bounds kCount{.min = 0, .max = kMaxSearchCount};

// The tie-break is an enum: read and recorded by its name.
cli::SchemaEntry<A> tie_break_entry() {
  return {{.flag = "", .type = choice,
           .help = "What orders schedules of equal makespan in the latency search: `critical` (subtasks on a longest "
                   "path), `finish` (sum of device finishing times), `flow` (sum of subtask ends), `memory` (highest "
                   "device peak + ¼ × mean peak, one mean activation weighing one mean subtask: the paper's code's "
                   "order), `none` (the paper's flat energy)",
           .key = "tie_break", .choices = {"critical", "finish", "flow", "memory", "none"}},
          {},
          [](A& o) { return std::string(tie_break_name(o.tie_break)); },
          [](A& o) { return json(tie_break_name(o.tie_break)); },
          [](A& o, const json& v) { o.tie_break = parse_tie_break(v.get<std::string>()); }};
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : anneal_presets()) names.push_back(p.name);
  return names;
}

const cli::OptionSchema<AnnealOptions>& anneal_schema() {
  static const cli::OptionSchema<A> s = {
      // The latency search.
      field<A>(&A::t0, {.type = number, .help = "Initial temperature; 0: `t0_factor` × the mean subtask duration",
                        .key = "t0", .bounds = {.min = 0, .max = kMaxTemperature}}),
      field<A>(&A::t0_factor, {.type = number, .help = "Without `t0`: the initial temperature in mean subtask durations",
                               .key = "t0_factor", .bounds = {.min = 0, .max = kMaxFactor, .exclusive_min = true}}),
      field<A>(&A::t0_cycle, {.type = numbers,
                              .help = "Round k starts at t0 × F[(k + rank) mod n]: hot rounds climb out of deep basins, "
                                      "cold ones descend narrow ones",
                              .key = "t0_cycle", .bounds = {.min = 0, .exclusive_min = true}}),  // 1e300: a rank that never cools
      field<A>(&A::alpha, {.type = number, .help = "Geometric cooling factor per iteration", .key = "alpha",
                           .bounds = {.min = 0.5, .max = 1}}),
      field<A>(&A::epsilon, {.type = number, .help = "A round ends (reheat) below this temperature; 0: t0 × 1e-4",
                             .key = "epsilon", .bounds = {.min = 0, .max = kMaxTemperature}}),
      tie_break_entry(),
      field<A>(&A::tie_weight, {.type = number, .help = "The tie-break's scale against the temperature",
                                .key = "tie_weight", .bounds = {.min = 0, .max = kMaxFactor}}),
      field<A>(&A::restart_from_best, {.type = boolean,
                                       .help = "At a reheat, go back to the best schedule found (false: anneal on from "
                                               "where the walk stands)",
                                       .key = "restart"}),
      field<A>(&A::chain_moves, {.type = number,
                                 .help = "Share of the latency search's proposals that are chain moves (one "
                                         "micro-batch's forwards or backwards shifted on every device at once); 0: "
                                         "swaps only",
                                 .key = "chain_moves", .bounds = {.min = 0, .max = 1}}),
      field<A>(&A::critical_moves, {.type = number,
                                    .help = "Share of the latency search's swaps drawn at a subtask on a longest path "
                                             "(with its device neighbour before or after it) instead of anywhere",
                                    .key = "critical_moves", .bounds = {.min = 0, .max = 1}}),
      field<A>(&A::mem_weight, {.type = number,
                                .help = "Experimental: latency energy = makespan + W × (mean subtask / mean act_mem) × "
                                        "peak memory",
                                .key = "mem_weight", .bounds = {.min = 0, .max = kMaxFactor}}),
      // The memory phase.
      field<A>(&A::mem_iterations,
               {.flag = "--mem-iterations", .type = integer,
                .help = "Neighbours of the memory phase's passes (0: until the time is up, or 20M without a time "
                        "limit; it also stops at serial 1F1B's peak)",
                .key = "mem_iterations", .bounds = kCount}),
      field<A>(&A::mem_t0_factor, {.type = number,
                                   .help = "The memory pass's initial temperature, in mean activation memories",
                                   .key = "mem_t0_factor", .bounds = {.min = 0, .max = kMaxFactor, .exclusive_min = true}}),
      field<A>(&A::mem_chain_moves, {.type = number, .help = "The share of chain moves in the memory pass",
                                     .key = "mem_chain_moves", .bounds = {.min = 0, .max = 1}}),
      field<A>(&A::mem_level_margin,
               {.type = number,
                .help = "The memory pass's energy counts the memory above its lowest peak so far less M mean "
                        "activations, never below serial 1F1B's peak; a large M (1e9) counts all the memory above "
                        "serial 1F1B's peak",
                .key = "mem_level_margin", .bounds = {.min = 0, .max = kMaxFactor}}),
      field<A>(&A::mem_polish, {.type = integer,
                                .help = "After a memory pass that stalls, every other pass is a polish: N neighbours "
                                        "from the last result, five times colder; 0: every pass starts from a latency "
                                        "search's schedule",
                                .key = "mem_polish", .bounds = kCount}),
      field<A>(&A::mem_resequence, {.type = boolean,
                                    .help = "After every memory pass, make each device again exactly (its lowest-peak "
                                            "order that keeps the others' times)",
                                    .key = "mem_resequence"}),
      field<A>(&A::mem_exact_nodes,
               {.flag = "--mem-exact-nodes", .type = integer,
                .help = "Last, on problems whose device grids are small (Table 3's GBS 8 and 16), take the peak down "
                        "by a search over every device's order for at most N nodes (under a time limit: half of the "
                        "memory phase instead); 0: not at all",
                .key = "mem_exact_nodes", .bounds = kCount}),
      // Ranks under MPI.
      field<A>(&A::sync_every, {.type = integer,
                                .help = "MPI: ranks meet every N valid neighbours (stop together, share the best "
                                        "schedule)",
                                .key = "sync_every", .bounds = {.min = 1, .max = kMaxSearchCount}}),
      field<A>(&A::sync_seconds, {.type = number,
                                  .help = "MPI, under a time limit without an iteration budget: ranks meet every S "
                                          "seconds of wall time instead; 0: by neighbours always",
                                  .key = "sync_seconds", .bounds = {.min = 0, .max = kMaxSeconds}}),
      field<A>(&A::share_best, {.type = boolean,
                                .help = "MPI: a rank takes a better rank's schedule as the best it restarts from at "
                                        "its next reheat (false: ranks still stop together, nothing more)",
                                .key = "share"}),
  };
  return s;
}

const cli::OptionSchema<SchedgenOptions>& schedgen_schema() {
  static const cli::OptionSchema<O> s = [] {
    cli::OptionSchema<O> out = {
        field<O>(&O::spec, {.flag = "spec", .type = path,
                            .help = "braid.schedspec JSON, or a braid.plan from braid-meshplan (its fused training "
                                    "stage, fusion.intra_stage.schedspec); '-' for stdin",
                            .show_default = false}),
        field<O>(&O::output, {.flag = "-o,--output", .type = path,
                              .help = "Where to write the braid.schedule JSON ('-' for stdout; files are written "
                                      "atomically)"}),
        field<O>(&O::svg, {.flag = "--svg", .type = path,
                           .help = "Also draw the timeline of every device and the activation memory beneath to this SVG",
                           .show_default = false}),
        field<O>(&O::verify, {.flag = "--verify", .type = path,
                              .help = "Instead: dry-run the instruction streams of this braid.schedule file; exit 0 if "
                                      "they run deadlock-free in the predicted makespan, 2 otherwise (with a step x "
                                      "device grid)",
                              .show_default = false}),
        field<O>(&O::preset, {.flag = "--preset", .type = choice,
                              .help = "The annealer's knobs by name (docs/tools/schedgen.md, \"Presets\"); the spec's "
                                      "\"anneal\" block goes over them, and --mem-iterations and --mem-exact-nodes over "
                                      "both",
                              .choices = preset_names()}),
        field<O>(&O::start, {.flag = "--start", .type = choice,
                             .help = "The initial state: greedy fusion (the paper's), 1F1B model after model (lower "
                                     "memory, slower to the bound), or both: greedy, then, if that reached the bound "
                                     "within a tenth of the budget, 1F1B with the budget left (at most 35% of it), the "
                                     "lower peak winning",
                             .choices = {"both", "greedy", "1f1b"}}),
        field<O>([](O& o) -> auto& { return o.anneal.seed; },
                 {.flag = "--seed", .type = integer, .help = "Random seed (rank r anneals from stream r)",
                  .bounds = kCount}),
        field<O>([](O& o) -> auto& { return o.anneal.iterations; },
                 {.flag = "--iterations", .type = integer,
                  .help = "Neighbours per rank for the latency search (0: no cap); alone (no --time-limit) the result "
                          "is a function of spec, seed and rank count",
                  .bounds = kCount}),
        field<O>([](O& o) -> auto& { return o.anneal.time_limit; },
                 {.flag = "--time-limit", .type = number,
                  .help = "Seconds of latency search per rank (0: none); the memory phase then runs until 1.5 x this "
                          "from the start. Not applied when --iterations is given without it",
                  .bounds = {.min = 0, .max = kMaxSeconds}}),
    };
    for (auto& e : cli::nested<O>(anneal_schema(), &O::anneal)) out.push_back(std::move(e));
    return out;
  }();
  return s;
}

const std::vector<AnnealPreset>& anneal_presets() {
  static const std::vector<AnnealPreset> p = {
      {"default", "every search: the knobs docs/tools/schedgen.md's figures were measured with", json::object()},
      {"quick", "a schedule in seconds where its memory matters less (tests, a first look at a plan): the memory "
                "phase held to 2M neighbours, its exact search to 2,000 nodes",
       {{"mem_iterations", 2000000}, {"mem_exact_nodes", 2000}}},
      {"thorough", "runs under budgets (--iterations) worth minutes: five times the default's memory neighbours "
                   "(100M without a time limit) and exact-search nodes, for lower peaks where the memory pass is "
                   "short of neighbours (the large settings)",
       {{"mem_iterations", 100000000}, {"mem_exact_nodes", 100000}}},
  };
  return p;
}

void check_anneal_block(Checker& c, const json& block, std::string_view where) {
  AnnealOptions scratch;
  cli::read_keyed(c, block, where, anneal_schema(), scratch);
}

void finish_command_line(const CLI::App& app, SchedgenOptions& opt) {
  if (!opt.verify.empty() && !opt.spec.empty()) throw UsageError("give either a spec or --verify FILE, not both");
  if (opt.verify.empty() && opt.spec.empty()) throw UsageError("a schedspec file is required (or --verify FILE)");
  // An iteration budget alone makes the result a function of spec, seed and rank
  // count; the default time limit applies only when no budget is given.
  if (opt.anneal.iterations > 0 && app.count("--time-limit") == 0) opt.anneal.time_limit = 0;
  if (opt.verify.empty() && opt.anneal.iterations == 0 && opt.anneal.time_limit == 0) {
    throw UsageError("--iterations 0 with --time-limit 0 would never stop; set one of them");
  }
  for (const auto& e : anneal_schema()) {
    if (!e.spec.flag.empty() && app.count(e.spec.name()) > 0) opt.knobs_given.push_back(e.spec.key);
  }
}

void settle_knobs(SchedgenOptions& opt, const json& block) {
  const auto preset = std::find_if(anneal_presets().begin(), anneal_presets().end(),
                                   [&](const AnnealPreset& p) { return p.name == opt.preset; });
  if (preset == anneal_presets().end()) throw UsageError("no preset '" + opt.preset + "'");
  AnnealOptions knobs;
  Checker c("preset " + opt.preset);
  cli::read_keyed(c, preset->knobs, "", anneal_schema(), knobs);
  cli::read_keyed(c, block, "anneal", anneal_schema(), knobs);
  c.check();
  for (const auto& e : anneal_schema()) {
    const bool given = std::find(opt.knobs_given.begin(), opt.knobs_given.end(), e.spec.key) != opt.knobs_given.end();
    if (!given) e.set(opt.anneal, e.get(knobs));
  }
}

ordered_json knob_record(const AnnealOptions& o) {
  AnnealOptions copy = o;
  return cli::keyed_values(anneal_schema(), copy);
}

}  // namespace braid::sched

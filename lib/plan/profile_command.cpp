#include "plan/profile_command.hpp"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "backend/registry.hpp"
#include "comm/job.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "io/fingerprint.hpp"
#include "model/config.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/comm_probe.hpp"
#include "plan/engine_runner.hpp"
#include "plan/experiment.hpp"
#include "plan/host_probe.hpp"
#include "plan/made_from.hpp"
#include "plan/probes.hpp"
#include "plan/train_probe.hpp"

namespace braid::plan {
namespace {

ModelShape shape_from_file(const std::string& path, bool value_head) {
  const json cfg = load_json_file(path);
  Checker c(path);
  // The config is read as braid-train reads it: what braid cannot run is refused here too.
  ModelShape s = shape_from_hf_config(cfg, c, "");
  c.check();
  s.value_head = value_head;
  s.name = std::filesystem::path(path).stem().string() + (value_head ? "-value" : "");
  return s;
}

std::vector<ModelShape> shapes_of(const ProfileModelArgs& a) {
  std::vector<ModelShape> out;
  auto add = [&](ModelShape s) {
    for (const auto& o : out) {
      if (o.same_as(s)) return;
    }
    out.push_back(std::move(s));
  };
  for (const auto& f : a.models) add(shape_from_file(f, false));
  for (const auto& f : a.value_models) add(shape_from_file(f, true));
  if (!a.experiment.empty()) {
    for (const auto& m : load_experiment(a.experiment).models) add(m.shape);
  }
  if (out.empty()) throw UsageError("name the models: --model CONFIG, --value-model CONFIG or --experiment FILE");
  return out;
}

void write_json(const std::string& path, const ordered_json& j) { write_text_file(path, j.dump(2) + "\n"); }

// A profile with the record of what made it: the verb, its options and the files it read by
// content (the models' configs, an experiment and the configs it names, a hardware file, the
// measured profile it calibrates from); a preset by name.
void write_profile(const ProfileOptions& o, const std::string& verb, const Profile& p) {
  io::MadeFrom m("braid-profile " + verb);
  m.set_options(o.option_values, o.options_given);
  const auto files = [](const std::vector<std::string>& v) { return std::vector<std::filesystem::path>(v.begin(), v.end()); };
  if (!o.m.models.empty()) m.add_input("models", files(o.m.models));
  if (!o.m.value_models.empty()) m.add_input("value models", files(o.m.value_models));
  if (!o.m.experiment.empty()) add_experiment_input(m, o.m.experiment);
  if (!o.hardware.empty()) add_hardware_input(m, o.hardware);
  if (!o.calibrate.empty()) m.add_input_path("calibrate", o.calibrate);
  ordered_json j = profile_to_json(p);
  j["made_from"] = m.to_json();
  write_json(o.output, j);
}

// measure's ranks other than 0 wait for rank 0's tables (comm::release_from).
constexpr int kTagMeasured = 1;

// Rank 0's release of the others when it is done, however it ends (a throw too: the
// others would wait for it until their idle deadline).
struct ReleaseOthers {
  comm::Communicator* world = nullptr;
  ~ReleaseOthers() {
    if (world == nullptr) return;
    try {
      comm::release_from(*world, 0, kTagMeasured);
    } catch (...) {   // a destructor: the command's own error is the one to report
    }
  }
};

}  // namespace

int run_profile_analytic(const ProfileOptions& o) {
  Hardware hw = load_hardware(o.hardware);
  if (!o.calibrate.empty()) {
    const Profile measured = load_profile(o.calibrate);
    hw.eff = calibrate_efficiency(hw, measured);
    log::info("calibrated efficiency from {}: matmul {:.3f}, memory {:.3f}", o.calibrate, hw.eff.matmul, hw.eff.memory);
  }
  const Profile p = analytic_profile(hw, shapes_of(o.m));
  write_profile(o, "analytic", p);
  for (const auto& m : p.models) log::info("{}: BS_max {}", m.name, m.bs_max);
  return 0;
}

int run_profile_probe(const ProfileOptions& o) {
  const ProbeResult r = probe_machine(1024, 256e6, o.repeats);
  ordered_json j{{"format", "braid.probe"},
                 {"version", 1},
                 {"threads", r.threads},
                 {"gemm_gflops", r.gemm_flops / 1e9},
                 {"gemm_spread", r.gemm_spread},
                 {"copy_gbs", r.mem_bandwidth / 1e9},
                 {"copy_spread", r.mem_spread}};
  write_json(o.output, j);
  return 0;
}

int run_profile_comm(const ProfileOptions& o) {
  comm::Job job(nullptr, nullptr);
  if (job.world().size() < 2) throw UsageError("comm needs at least two ranks: run it under mpirun -np 2 (or more)");
  const CommMeasurement m = measure_comm(job.world(), o.comm_max_mb * 1e6, o.repeats);
  if (job.world().rank() == 0) write_json(o.output, comm_to_json(m));
  return 0;
}

int run_profile_measure(const ProfileOptions& o) {
  auto be = backend::make_backend(o.device, o.threads);  // first: a device that is not here ends the run at once
  comm::Job job(nullptr, nullptr);
  std::optional<CommMeasurement> links;
  ReleaseOthers release;
  if (job.under_mpi()) {
    links = measure_comm(job.world(), o.comm_max_mb * 1e6, o.repeats);
    // Rank 0 measures the rest alone; the others wait for it asleep, not spinning in MPI's
    // finalisation on a core it times the layers on (which made every table up to 2x slow).
    if (job.world().rank() != 0) {
      comm::release_from(job.world(), 0, kTagMeasured);
      return 0;
    }
    release.world = &job.world();
  }

  const auto shapes = shapes_of(o.m);
  Profile p;
  p.source = "measured";
  // The hardware block is the device's that the model is measured on: the host's probes
  // for the CPU, the backend's for a GPU (its products in the weights' type, its copy
  // bandwidth and memory).
  if (const auto dm = be->device_memory()) {
    log::info("probing {}", be->name());
    const ProbeResult probe = probe_backend(*be, o.dtype, 4096, double(1 << 30), o.repeats);
    p.hardware = device_hardware(probe, be->name(), static_cast<double>(dm->total),
                                 static_cast<int>(backend::dtype_size(o.dtype)));
  } else {
    log::info("probing this machine ({} threads)", be->threads());
    const ProbeResult probe = probe_machine(1024, 256e6, o.repeats);
    const double mem = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    p.hardware = cpu_hardware(probe, mem);
  }
  p.comm = analytic_comm(p.hardware);
  if (links && links->ranks > 1) {
    auto& intra = links->same_host ? p.comm.p2p_intra : p.comm.p2p_inter;
    auto& intra_ar = links->same_host ? p.comm.allreduce_intra : p.comm.allreduce_inter;
    intra = links->p2p_link;
    intra_ar = links->allreduce_link;
  }
  MeasureOptions mo;
  mo.repeats = o.repeats;
  if (o.quick) {
    mo.grids.tokens = pow2_grid(16, 1024);
    mo.grids.seq_len = pow2_grid(64, 256);
    mo.grids.batch = pow2_grid(1, 16);
    mo.grids.kv_len = pow2_grid(64, 256);
  }
  if (o.max_batch > 0) mo.grids.batch = pow2_grid(1, o.max_batch);
  if (!o.m.experiment.empty()) reach_shortest_context(load_experiment(o.m.experiment), mo.grids);
  RunnerLimits lim;
  lim.max_tokens = static_cast<int>(mo.grids.tokens.back());
  lim.max_seq_len = static_cast<int>(mo.grids.seq_len.back());
  lim.max_batch = static_cast<int>(mo.grids.batch.back());
  lim.max_kv_len = static_cast<int>(mo.grids.kv_len.back());
  lim.dtype = o.dtype;
  for (const auto& s : shapes) {
    const std::size_t points = mo.grids.tokens.size() * (mo.grids.seq_len.size() + 1) +
                               mo.grids.batch.size() * (mo.grids.kv_len.size() + (s.value_head ? 0 : 1));
    Progress bar("measuring " + s.name, points, "points");
    mo.on_point = [&](const std::string& what) {
      bar.advance();
      bar.set_status(what);
    };
    auto runner = make_engine_runner(s, *be, lim);
    p.models.push_back(measure_model(s, *runner, 4, mo));
    bar.finish();
    // The trainer's own costs beyond the tables (a whole model of the shape: skipped for
    // shapes whose f32 weights pass 2 GiB, where one layer is all the tables need).
    if (s.total_params() * 4 < 2e9) {
      measure_train_extra(p.models.back(), *be, o.repeats);
      const auto& x = p.models.back().train_extra;
      log::info("{}: training beyond the tables: {:.3f} ms a micro-batch, {:.2f} us a token, {:.3f} ms a step", s.name,
                x.micro * 1e3, x.token * 1e6, x.step * 1e3);
    }
    log::info("{}: BS_max {}", s.name, p.models.back().bs_max);
  }
  // Efficiencies against the probes, so `analytic --hardware` on this profile's
  // hardware block predicts other shapes at this machine's speed.
  p.hardware.eff = calibrate_efficiency(p.hardware, p);
  if (o.host) {
    log::info("measuring process and MPI start-up, memory first touch and HDF5 files");
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    p.host = probe_host({.self = self.empty() ? "braid-profile" : self, .mpirun = o.mpirun, .repeats = o.repeats});
    log::info("{} cores; process start {:.1f} ms; mpirun -np 1 {:.0f} ms; touch {:.2f} GB/s; HDF5 file {:.1f} ms, "
              "dataset {:.2f} ms, write {:.2f} GB/s, read {:.2f} GB/s",
              p.host.cores, p.host.process_start * 1e3, p.host.mpi_start.v.empty() ? 0.0 : p.host.mpi_start.v[0] * 1e3,
              p.host.touch_bandwidth / 1e9, p.host.file_latency * 1e3, p.host.dataset_latency * 1e3,
              p.host.write_bandwidth / 1e9,
              p.host.read_bandwidth / 1e9);
  }
  write_profile(o, "measure", p);
  return 0;
}

namespace {

using cli::custom;
using cli::field;
using namespace cli::option_types;
using O = ProfileOptions;

cli::SchemaEntry<O> model_entry() {
  return field<O>([](O& o) -> auto& { return o.m.models; },
                  {.flag = "--model", .type = path, .help = "HF config.json of a model with an LM head (repeatable)",
                   .show_default = false,
                   .doc = "a Hugging Face `config.json` of a model with an LM head (repeatable)"});
}

cli::SchemaEntry<O> value_model_entry() {
  return field<O>([](O& o) -> auto& { return o.m.value_models; },
                  {.flag = "--value-model", .type = path,
                   .help = "HF config.json of a critic/reward model (value head; repeatable)", .show_default = false,
                   .doc = "a config of a critic or reward model (value head; repeatable)"});
}

cli::SchemaEntry<O> experiment_entry() {
  return field<O>([](O& o) -> auto& { return o.m.experiment; },
                  {.flag = "--experiment", .type = path, .help = "take the four models of a braid.experiment",
                   .show_default = false,
                   .doc = "the four models of a `braid.experiment`; measure: the decode steps' KV lengths start at its "
                          "shortest prompt (the power of two at or below it, at least 8), so its short contexts are "
                          "measured, not read at the grid's first column"});
}

cli::SchemaEntry<O> repeats_entry(std::string help) {
  return field<O>(&O::repeats, {.flag = "--repeats", .type = integer, .help = std::move(help),
                                .bounds = {.min = 1, .max = 1000},
                                .doc = "timed runs per point (measure: the median and the spread are kept), per size "
                                       "(comm)"});
}

cli::SchemaEntry<O> output_entry() {
  return field<O>(&O::output, {.flag = "-o,--output", .type = path, .help = "output file ('-': stdout)"});
}

const cli::OptionSchema<O>& analytic_schema() {
  static const cli::OptionSchema<O> s = {
      field<O>(&O::hardware, {.flag = "--hardware", .type = text, .help = "h100, h200 or a hardware JSON file",
                              .required = true, .show_default = false,
                              .doc = "`h100`, `h200` or a hardware JSON file (the `hardware` object of a profile)"}),
      field<O>(&O::calibrate, {.flag = "--calibrate", .type = path,
                               .help = "take the efficiency factors from a measured profile.json",
                               .show_default = false}),
      model_entry(), value_model_entry(), experiment_entry(), output_entry(),
  };
  return s;
}

const cli::OptionSchema<O>& measure_schema() {
  static const cli::OptionSchema<O> s = [] {
    auto max_batch = field<O>(&O::max_batch,
                              {.flag = "--max-batch", .type = integer,
                               .help = "decode steps at batches 1, 2, 4, ... up to this (default 64, --quick 16): the "
                                       "generator's --max-batch, so that its steps are measured, not extrapolated",
                               .bounds = {.min = 1, .max = 4096}, .show_default = false});
    max_batch.docs_default = [](O&) { return std::string("64; --quick 16"); };
    return cli::OptionSchema<O>{
        model_entry(), value_model_entry(), experiment_entry(),
        repeats_entry("timed runs per point (median and spread kept)"),
        field<O>(&O::quick, {.flag = "--quick", .type = boolean,
                             .help = "smaller grids (tokens to 1024, batch to 16, lengths to 256)",
                             .show_default = false}),
        field<O>(&O::threads, {.flag = "--threads", .type = integer,
                               .help = "backend threads (0: all cores of this process)", .bounds = {.min = 0}}),
        backend::device_entry<O>(&O::device, "`cpu` or `cuda[:N]`, as braid-generate takes it"),
        backend::dtype_entry<O>(&O::dtype,
                                "`bf16`: decoder layers with bf16 weights (the embedding and head probes stay f32)"),
        max_batch,
        custom<O>([](CLI::App& app, O& o, const cli::OptionSpec& spec) {
                    return app.add_flag("!" + spec.flag, o.host, spec.help);
                  },
                  {.flag = "--no-host", .type = boolean,
                   .help = "leave out the host costs of a run (process and MPI start-up, memory first touch, HDF5 files)",
                   .doc = "leave out the host costs of a run (the profile's `host` block: process and MPI start-up, "
                          "memory first touch, HDF5 files)"},
                  [](O& o) { return std::string(o.host ? "off" : "on"); }),
        custom<O>([](CLI::App& app, O& o, const cli::OptionSpec& spec) {
                    return cli::decorate(app.add_option(spec.flag, o.mpirun, spec.help), spec)->expected(1, 16);
                  },
                  {.flag = "--mpirun", .type = text,
                   .help = "how the host costs start an MPI job (the launcher and its options, before -np)",
                   .doc = "how an MPI job starts (the launcher and its options, before `-np`; a word that starts "
                          "with `-` given as `--mpirun=--oversubscribe`), for the host costs' start-up of 1, 2 and 4 "
                          "ranks"},
                  [](O& o) { return fmt::format("{}", fmt::join(o.mpirun, " ")); }),
        output_entry(),
    };
  }();
  return s;
}

}  // namespace

const std::vector<ProfileVerb>& profile_verbs() {
  static const std::vector<ProfileVerb> verbs = {
      {"analytic", "the profile a given hardware would measure (roofline model)", analytic_schema(),
       run_profile_analytic},
      {"measure", "measure on this machine with braid's engine (links too, under mpirun)", measure_schema(),
       run_profile_measure},
      {"probe", "matrix-product and memory throughput of this machine", {repeats_entry("timed runs"), output_entry()},
       run_profile_probe},
      {"comm", "point-to-point and all-reduce bandwidth and latency (run under mpirun)",
       {repeats_entry("timed runs per size"),
        field<O>(&O::comm_max_mb, {.flag = "--max-mb", .type = number, .help = "largest message in MB",
                                   .bounds = {.min = 0, .exclusive_min = true}}),
        output_entry()},
       run_profile_comm},
  };
  return verbs;
}

void add_profile_verbs(CLI::App& app, ProfileOptions& o) {
  for (const auto& verb : profile_verbs()) cli::add_schema_options(*app.add_subcommand(verb.name, verb.help), o, verb.schema);
  // What the host costs spawn to time a process start and an MPI job's (hidden).
  app.add_subcommand("noop", "")->group("");
  app.add_subcommand("mpi-noop", "")->group("");
}

int run_profile(const CLI::App& app, ProfileOptions& o) {
  if (app.got_subcommand("noop")) return 0;
  if (app.got_subcommand("mpi-noop")) return run_mpi_noop();
  // The options a profile records (the files it reads are recorded by content instead).
  const std::vector<std::string> not_recorded = {"--model", "--value-model", "--experiment", "--hardware",
                                                 "--calibrate", "--output", "--quiet", "--verbose", "--version"};
  for (const auto& verb : profile_verbs()) {
    const CLI::App* cmd = app.get_subcommand(verb.name);
    if (!cmd->parsed()) continue;
    o.option_values = cli::option_values(*cmd, not_recorded);
    o.options_given = cli::options_given(*cmd, not_recorded);
    return verb.run(o);
  }
  throw UsageError("name a verb: analytic, measure, probe or comm");
}

}  // namespace braid::plan

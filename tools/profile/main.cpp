// braid-profile: what each piece of a model costs on a device -> profile.json.
//   analytic  from a hardware description (presets h100, h200) and model shapes
//   measure   on this machine, with braid's engine (and links under mpirun)
//   probe     matrix-product and memory throughput of this machine
//   comm      point-to-point and all-reduce between MPI ranks (under mpirun)
// The commands are lib/plan/profile_command.hpp; this file declares the flags.
#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "plan/host_probe.hpp"
#include "plan/profile_command.hpp"

namespace {

void add_model_options(CLI::App* cmd, braid::plan::ProfileModelArgs& a) {
  cmd->add_option("--model", a.models, "HF config.json of a model with an LM head (repeatable)");
  cmd->add_option("--value-model", a.value_models, "HF config.json of a critic/reward model (value head; repeatable)");
  cmd->add_option("--experiment", a.experiment, "take the four models of a braid.experiment");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Profiles what each piece of a model costs on a device: per decoder layer, embedding and head,\n"
               "forward and backward over micro-batch sizes, decode steps over batch and KV length (BS_max),\n"
               "memory per layer, and the links between devices. Writes braid.profile JSON.",
               "braid-profile"};
  app.require_subcommand(1);
  app.fallthrough();  // -q, -v after the verb
  braid::plan::ProfileOptions o;
  auto* analytic = app.add_subcommand("analytic", "the profile a given hardware would measure (roofline model)");
  analytic->add_option("--hardware", o.hardware, "h100, h200 or a hardware JSON file")->required();
  analytic->add_option("--calibrate", o.calibrate, "take the efficiency factors from a measured profile.json");
  add_model_options(analytic, o.m);
  auto* measure = app.add_subcommand("measure", "measure on this machine with braid's engine (links too, under mpirun)");
  add_model_options(measure, o.m);
  measure->add_option("--repeats", o.repeats, "timed runs per point (median and spread kept)")->check(CLI::Range(1, 1000))->capture_default_str();
  measure->add_flag("--quick", o.quick, "smaller grids (tokens to 1024, batch to 16, lengths to 256)");
  measure->add_option("--threads", o.threads, "backend threads (0: all cores of this process)")->capture_default_str();
  braid::backend::add_device_option(*measure, o.device);
  braid::backend::add_dtype_option(*measure, o.dtype);
  measure->add_option("--max-batch", o.max_batch,
                      "decode steps at batches 1, 2, 4, ... up to this (default 64, --quick 16): the generator's "
                      "--max-batch, so that its steps are measured, not extrapolated")
      ->check(CLI::Range(1, 4096));
  measure->add_flag("!--no-host", o.host,
                    "leave out the host costs of a run (process and MPI start-up, memory first touch, HDF5 files)");
  measure->add_option("--mpirun", o.mpirun,
                      "how the host costs start an MPI job (the launcher and its options, before -np)")
      ->expected(1, 16)
      ->capture_default_str();
  auto* probe = app.add_subcommand("probe", "matrix-product and memory throughput of this machine");
  probe->add_option("--repeats", o.repeats, "timed runs")->check(CLI::Range(1, 1000))->capture_default_str();
  auto* comm = app.add_subcommand("comm", "point-to-point and all-reduce bandwidth and latency (run under mpirun)");
  comm->add_option("--repeats", o.repeats, "timed runs per size")->check(CLI::Range(1, 1000))->capture_default_str();
  comm->add_option("--max-mb", o.comm_max_mb, "largest message in MB")->check(CLI::PositiveNumber)->capture_default_str();
  // What the host costs spawn to time a process start and an MPI job's (hidden).
  auto* noop = app.add_subcommand("noop", "")->group("");
  auto* mpi_noop = app.add_subcommand("mpi-noop", "")->group("");
  for (auto* cmd : {analytic, measure, probe, comm}) {
    cmd->add_option("-o,--output", o.output, "output file ('-': stdout)")->capture_default_str();
  }
  // MPI starts only after parsing: the launcher says which rank prints usage.
  braid::cli::set_first_process(braid::comm::launcher_rank() == 0);
  return braid::cli::run(app, argc, argv, [&] {
    if (noop->parsed()) return 0;
    if (mpi_noop->parsed()) return braid::plan::run_mpi_noop();
    // The options a profile records (the files it reads are recorded by content instead).
    const std::vector<std::string> not_recorded = {"--model", "--value-model", "--experiment", "--hardware",
                                                   "--calibrate", "--output", "--quiet", "--verbose", "--version"};
    for (CLI::App* verb : {analytic, measure}) {
      if (!verb->parsed()) continue;
      o.option_values = braid::cli::option_values(*verb, not_recorded);
      o.options_given = braid::cli::options_given(*verb, not_recorded);
    }
    if (analytic->parsed()) return braid::plan::run_profile_analytic(o);
    if (measure->parsed()) return braid::plan::run_profile_measure(o);
    if (probe->parsed()) return braid::plan::run_profile_probe(o);
    return braid::plan::run_profile_comm(o);
  });
}

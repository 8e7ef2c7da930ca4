// braid-profile: what each piece of a model costs on a device -> profile.json.
//   analytic  from a hardware description (presets h100, h200) and model shapes
//   measure   on this machine, with braid's engine (and links under mpirun)
//   probe     matrix-product and memory throughput of this machine
//   comm      point-to-point and all-reduce between MPI ranks (under mpirun)
#include "backend/dtype_option.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/comm_probe.hpp"
#include "plan/engine_runner.hpp"
#include "plan/experiment.hpp"
#include "plan/probes.hpp"

namespace {

using namespace braid;
using namespace braid::plan;

struct ModelArgs {
  std::vector<std::string> models, value_models;
  std::string experiment;
};

struct Options {
  ModelArgs m;
  std::string hardware;
  std::string calibrate;
  std::string output = "profile.json";
  int repeats = 5;
  bool quick = false;
  int threads = 0;
  braid::backend::DType dtype = braid::backend::DType::f32;
  int max_batch = 0;  // decode batch grid's top; 0: the grid's default
  double comm_max_mb = 64;
};

ModelShape shape_from_file(const std::string& path, bool value_head) {
  const json cfg = load_json_file(path);
  Checker c(path);
  ModelShape s = shape_from_hf_config(cfg, c, "");
  c.check();
  s.value_head = value_head;
  s.name = std::filesystem::path(path).stem().string() + (value_head ? "-value" : "");
  return s;
}

std::vector<ModelShape> shapes_of(const ModelArgs& a) {
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

void add_model_options(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--model", a.models, "HF config.json of a model with an LM head (repeatable)");
  cmd->add_option("--value-model", a.value_models, "HF config.json of a critic/reward model (value head; repeatable)");
  cmd->add_option("--experiment", a.experiment, "take the four models of a braid.experiment");
}

void write_json(const std::string& path, const ordered_json& j) { write_text_file(path, j.dump(2) + "\n"); }

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

// MPI for the lifetime of a command; finalised even when the command throws.
struct MpiSession {
  MpiSession() { MPI_Init(nullptr, nullptr); }
  ~MpiSession() { MPI_Finalize(); }
  int rank() const {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
};

int run_analytic(const Options& o) {
  Hardware hw = load_hardware(o.hardware);
  if (!o.calibrate.empty()) {
    const Profile measured = load_profile(o.calibrate);
    hw.eff = calibrate_efficiency(hw, measured);
    log::info("calibrated efficiency from {}: matmul {:.3f}, memory {:.3f}", o.calibrate, hw.eff.matmul, hw.eff.memory);
  }
  const Profile p = analytic_profile(hw, shapes_of(o.m));
  write_json(o.output, profile_to_json(p));
  for (const auto& m : p.models) log::info("{}: BS_max {}", m.name, m.bs_max);
  return 0;
}

int run_probe(const Options& o) {
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

int run_comm(const Options& o) {
  MpiSession mpi;
  const CommMeasurement m = measure_comm(o.comm_max_mb * 1e6, o.repeats);
  if (m.ranks < 2) throw UsageError("comm needs at least two ranks: run it under mpirun -np 2 (or more)");
  if (mpi.rank() == 0) write_json(o.output, comm_to_json(m));
  return 0;
}

int run_measure(const Options& o) {
  std::optional<MpiSession> mpi;
  if (under_mpirun()) mpi.emplace();
  std::optional<CommMeasurement> comm;
  if (mpi) comm = measure_comm(o.comm_max_mb * 1e6, o.repeats);
  if (mpi && mpi->rank() != 0) return 0;

  const auto shapes = shapes_of(o.m);
  auto be = backend::make_cpu_backend(o.threads);
  log::info("probing this machine ({} threads)", be->threads());
  const ProbeResult probe = probe_machine(1024, 256e6, o.repeats);
  const double mem = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  Profile p;
  p.source = "measured";
  p.hardware = cpu_hardware(probe, mem);
  p.comm = analytic_comm(p.hardware);
  if (comm && comm->ranks > 1) {
    auto& intra = comm->same_host ? p.comm.p2p_intra : p.comm.p2p_inter;
    auto& intra_ar = comm->same_host ? p.comm.allreduce_intra : p.comm.allreduce_inter;
    intra = comm->p2p_link;
    intra_ar = comm->allreduce_link;
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
    log::info("{}: BS_max {}", s.name, p.models.back().bs_max);
  }
  // Efficiencies against the probes, so `analytic --hardware` on this profile's
  // hardware block predicts other shapes at this machine's speed.
  p.hardware.eff = calibrate_efficiency(p.hardware, p);
  write_json(o.output, profile_to_json(p));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Profiles what each piece of a model costs on a device: per decoder layer, embedding and head,\n"
               "forward and backward over micro-batch sizes, decode steps over batch and KV length (BS_max),\n"
               "memory per layer, and the links between devices. Writes braid.profile JSON.",
               "braid-profile"};
  app.require_subcommand(1);
  app.fallthrough();  // -q, -v after the verb
  Options o;
  auto* analytic = app.add_subcommand("analytic", "the profile a given hardware would measure (roofline model)");
  analytic->add_option("--hardware", o.hardware, "h100, h200 or a hardware JSON file")->required();
  analytic->add_option("--calibrate", o.calibrate, "take the efficiency factors from a measured profile.json");
  add_model_options(analytic, o.m);
  auto* measure = app.add_subcommand("measure", "measure on this machine with braid's engine (links too, under mpirun)");
  add_model_options(measure, o.m);
  measure->add_option("--repeats", o.repeats, "timed runs per point (median and spread kept)")->check(CLI::Range(1, 1000))->capture_default_str();
  measure->add_flag("--quick", o.quick, "smaller grids (tokens to 1024, batch to 16, lengths to 256)");
  measure->add_option("--threads", o.threads, "backend threads (0: all cores of this process)")->capture_default_str();
  braid::backend::add_dtype_option(*measure, o.dtype);
  measure->add_option("--max-batch", o.max_batch,
                      "decode steps at batches 1, 2, 4, ... up to this (default 64, --quick 16): the generator's "
                      "--max-batch, so that its steps are measured, not extrapolated")
      ->check(CLI::Range(1, 4096));
  auto* probe = app.add_subcommand("probe", "matrix-product and memory throughput of this machine");
  probe->add_option("--repeats", o.repeats, "timed runs")->check(CLI::Range(1, 1000))->capture_default_str();
  auto* comm = app.add_subcommand("comm", "point-to-point and all-reduce bandwidth and latency (run under mpirun)");
  comm->add_option("--repeats", o.repeats, "timed runs per size")->check(CLI::Range(1, 1000))->capture_default_str();
  comm->add_option("--max-mb", o.comm_max_mb, "largest message in MB")->check(CLI::PositiveNumber)->capture_default_str();
  for (auto* cmd : {analytic, measure, probe, comm}) {
    cmd->add_option("-o,--output", o.output, "output file ('-': stdout)")->capture_default_str();
  }
  return braid::cli::run(app, argc, argv, [&] {
    if (analytic->parsed()) return run_analytic(o);
    if (measure->parsed()) return run_measure(o);
    if (probe->parsed()) return run_probe(o);
    return run_comm(o);
  });
}

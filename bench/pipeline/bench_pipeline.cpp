// Throughput of one fused actor + critic training step (train/pipeline.hpp) on N MPI
// ranks, and how close its time comes to the makespan the schedule predicts from
// stage costs measured in a real step.
//
//   mpirun -np N bench_pipeline [--config examples/tiny/config.json] [--steps 3] ...
//
// 1. With N = 1 it also times the single-process step (the reference loop of the
//    proof test: actor then critic over the same micro-batches) for the baseline.
// 2. A profiling step over a unit-cost greedy schedule measures every stage's forward
//    and backward per micro-batch (StageTimes), on the ranks that will run them.
// 3. A schedule is made from those costs (greedy fusion, then annealing on rank 0),
//    and the fused step is timed over it: median of --steps after one warm-up.
// Prints a table and one JSON line.
#include "tests/pipeline/fused_setup.hpp"

#include "checkpoint/checkpoint.hpp"
#include "core/cli.hpp"
#include "comm/mpi.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/lower.hpp"
#include "sched/schedule.hpp"
#include "data/micro_batches.hpp"
#include "train/objectives.hpp"
#include "train/pipeline.hpp"
#include "train/trainer.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <numeric>
#include <unistd.h>

using namespace braid;

namespace {

struct Options {
  std::string config = "examples/tiny/config.json";
  std::string dir;
  int sequences = 32, min_len = 16, max_len = 48, micro_batches = 8, steps = 3, threads = 1;
  std::uint64_t anneal_iterations = 200000;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// This process's CPU time: on a shared machine the figure that does not depend on the
// neighbours' load (though it counts MPI's busy-waiting on receives).
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

optim::AdamWConfig adamw() { return {.weight_decay = 0.0, .max_grad_norm = 1.0}; }

struct Timed {
  std::vector<double> wall, cpu;
};

Timed time_single_process(const Options& o, const std::filesystem::path& dir,
                                        const std::vector<io::SampleBatch>& mbs, std::int64_t max_tokens) {
  auto be = backend::make_cpu_backend(o.threads);
  auto actor = checkpoint::open_model(dir / "actor.h5", *be).model;
  auto critic = checkpoint::open_model(dir / "critic.h5", *be).model;
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value;
  const train::TrainerOptions topt{.adamw = adamw(),
                                   .lr = {.peak_lr = 1e-5, .min_lr = 1e-5, .kind = optim::LrSchedule::Kind::constant},
                                   .micro = {.max_tokens = max_tokens, .max_sequences = o.sequences}};
  train::Trainer actor_trainer(*actor, policy, topt), critic_trainer(*critic, value, topt);
  Timed times;
  for (int s = 0; s <= o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    actor_trainer.step(mbs);
    critic_trainer.step(mbs);
    if (s > 0) {  // the first is a warm-up
      times.wall.push_back(seconds_since(t0));
      times.cpu.push_back(cpu_seconds() - c0);
    }
  }
  return times;
}

struct FusedRun {
  std::vector<double> step_seconds, stream_seconds, cpu_seconds;  // cpu: summed over ranks
  double wait_seconds = 0;
  // Per model, per stage: mean forward and backward seconds of one micro-batch.
  std::vector<std::vector<double>> fwd, bwd;
};

FusedRun run_fused(const Options& o, comm::Communicator& world, const sched::LoadedSchedule& schedule,
                   const std::filesystem::path& dir, const std::vector<io::SampleBatch>& mbs, std::int64_t max_tokens,
                   int steps) {
  auto be = backend::make_cpu_backend(o.threads);
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value;
  train::FusedPipeline pipe(schedule, world, *be,
                            {{"actor", dir / "actor.h5", &policy, adamw()}, {"critic", dir / "critic.h5", &value, adamw()}},
                            {.schedule_origin = "bench", .max_tokens = max_tokens, .max_sequences = o.sequences});
  const std::vector<std::vector<io::SampleBatch>> batches{mbs, mbs};
  const std::vector<double> lr{1e-5, 1e-5};
  FusedRun run;
  for (int s = 0; s <= steps; ++s) {
    const double c0 = cpu_seconds();
    const auto r = pipe.step(batches, lr);
    std::vector<double> cpu{cpu_seconds() - c0};
    world.all_reduce_sum(std::span<double>(cpu));
    if (s == 0) continue;
    run.cpu_seconds.push_back(cpu[0]);
    run.step_seconds.push_back(r.wall_seconds);
    run.stream_seconds.push_back(r.stream_seconds);
    run.wait_seconds += r.wait_seconds / steps;
  }
  const int n = world.size();
  std::vector<double> costs(static_cast<std::size_t>(4 * n), 0.0);  // [model][fwd|bwd][stage]
  for (int m = 0; m < 2; ++m) {
    const train::StageTimes t = pipe.stage_times(m);
    const int s = pipe.stage_index(m);
    costs[static_cast<std::size_t>((2 * m) * n + s)] = t.forward_seconds / t.micro_batches;
    costs[static_cast<std::size_t>((2 * m + 1) * n + s)] = t.backward_seconds / t.micro_batches;
  }
  world.all_reduce_sum(std::span<double>(costs));
  for (int m = 0; m < 2; ++m) {
    run.fwd.emplace_back(costs.begin() + (2 * m) * n, costs.begin() + (2 * m + 1) * n);
    run.bwd.emplace_back(costs.begin() + (2 * m + 1) * n, costs.begin() + (2 * m + 2) * n);
  }
  return run;
}

// The schedule for measured stage costs: greedy fusion, annealed (rank 0's result on every rank).
struct Made {
  sched::LoadedSchedule schedule;
  double makespan = 0, serial = 0, bound = 0;
};
Made schedule_from_costs(const Options& o, comm::Communicator& world, const FusedRun& profile) {
  const int n = world.size();
  std::string text;
  if (world.rank() == 0) {
    sched::SchedSpec spec;
    spec.devices = n;
    for (int m = 0; m < 2; ++m) {
      sched::ModelSpec ms{.name = m == 0 ? "actor" : "critic", .stages = n, .replicas = 1,
                          .micro_batches = o.micro_batches, .forward = m == 0};
      ms.fwd = profile.fwd[static_cast<std::size_t>(m)];
      ms.bwd = profile.bwd[static_cast<std::size_t>(m)];
      ms.act_mem.assign(static_cast<std::size_t>(n), 1.0);
      spec.models.push_back(ms);
    }
    const sched::Problem p = sched::build_problem(spec);
    const sched::Order start = sched::greedy(p).value_or(sched::one_f_one_b(p));
    const sched::LowerBound lb = sched::lower_bound(p);
    sched::AnnealOptions ao;
    ao.iterations = o.anneal_iterations;
    ao.time_limit = 0;
    const sched::AnnealResult best = sched::anneal(p, start, lb.value, ao);
    const sched::Timing timing = sched::evaluate(p, best.order);
    const sched::ScheduleSummary summary = sched::reference_summary(p);
    text = sched::schedule_to_json(p, best.order, timing, sched::lower(p, best.order, timing), summary).dump();
  }
  world.broadcast(text, 0);
  const json doc = json::parse(text);
  return {sched::load_schedule(doc, "bench schedule"), doc.at("makespan").get<double>(),
          doc.at("baselines").at("serial_1f1b").at("makespan").get<double>(), doc.at("lower_bound").get<double>()};
}

int run_bench(const Options& o) {
  auto world = comm::mpi_world();
  const int n = world->size(), rank = world->rank();
  const auto cfg = model::load_config(o.config);
  std::filesystem::path dir = o.dir;
  if (dir.empty()) {
    std::string where = rank == 0 ? (std::filesystem::temp_directory_path() / fmt::format("bench-pipeline-{}", ::getpid())).string() : "";
    world->broadcast(where, 0);
    dir = where;
  }
  if (rank == 0) {
    std::filesystem::create_directories(dir);
    test::write_actor_critic(cfg, dir, 1);
  }
  world->barrier();
  const auto samples = test::scored_samples(o.sequences, o.min_len, o.max_len, cfg.vocab_size, 2);
  std::vector<std::size_t> order(samples.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto mbs = data::split_micro_batches(samples, order, o.micro_batches);
  std::int64_t max_tokens = 0;
  for (const auto& mb : mbs) max_tokens = std::max<std::int64_t>(max_tokens, static_cast<std::int64_t>(mb.token_count()));
  const double tokens = static_cast<double>(samples.token_count());

  double single = 0, single_cpu = 0;
  if (n == 1) {
    const Timed t = time_single_process(o, dir, mbs, max_tokens);
    single = median(t.wall);
    single_cpu = median(t.cpu);
  }

  test::FusedModels unit{.devices = n, .actor_stages = n, .critic_stages = n, .micro_batches = o.micro_batches};
  const FusedRun profile = run_fused(o, *world, test::fused_schedule(unit), dir, mbs, max_tokens, 1);
  const Made made = schedule_from_costs(o, *world, profile);
  const FusedRun fused = run_fused(o, *world, made.schedule, dir, mbs, max_tokens, o.steps);
  const double step = median(fused.step_seconds), stream = median(fused.stream_seconds);
  const double cpu = median(fused.cpu_seconds);

  if (rank == 0) {
    std::printf("fused actor+critic step, %d rank(s) x %d thread(s), %s: %d sequences, %.0f tokens, %d micro-batches\n", n,
                o.threads, o.config.c_str(), o.sequences, tokens, o.micro_batches);
    for (int m = 0; m < 2; ++m) {
      std::printf("  %-6s stage costs (ms, fwd/bwd per micro-batch):", m == 0 ? "actor" : "critic");
      for (int s = 0; s < n; ++s) {
        std::printf(" %.2f/%.2f", 1e3 * profile.fwd[static_cast<std::size_t>(m)][static_cast<std::size_t>(s)],
                    1e3 * profile.bwd[static_cast<std::size_t>(m)][static_cast<std::size_t>(s)]);
      }
      std::printf("\n");
    }
    if (n == 1) {
      std::printf("  single process : %8.1f ms/step  %8.0f tokens/s  %8.1f CPU ms/step\n", 1e3 * single, tokens / single,
                  1e3 * single_cpu);
    }
    std::printf("  fused (median) : %8.1f ms/step  %8.0f tokens/s  %8.1f CPU ms/step, all ranks (blocked on receives %.1f ms)\n",
                1e3 * step, tokens / step, 1e3 * cpu, 1e3 * fused.wait_seconds);
    std::printf("  streams alone  : %8.1f ms (the step without gradient sums and AdamW)\n", 1e3 * stream);
    std::printf("  predicted      : %8.1f ms makespan (lower bound %.1f, serial 1F1B %.1f); streams/predicted %.2f\n",
                1e3 * made.makespan, 1e3 * made.bound, 1e3 * made.serial, stream / made.makespan);
    std::printf("{\"ranks\":%d,\"threads\":%d,\"tokens\":%.0f,\"single_ms\":%.3f,\"single_cpu_ms\":%.3f,\"fused_ms\":%.3f,\"fused_cpu_ms\":%.3f,\"fused_tokens_per_s\":%.1f,"
                "\"streams_ms\":%.3f,\"predicted_ms\":%.3f,\"serial_1f1b_ms\":%.3f,\"lower_bound_ms\":%.3f}\n",
                n, o.threads, tokens, 1e3 * single, 1e3 * single_cpu, 1e3 * step, 1e3 * cpu, tokens / step, 1e3 * stream, 1e3 * made.makespan, 1e3 * made.serial,
                1e3 * made.bound);
    if (o.dir.empty()) std::filesystem::remove_all(dir);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  Options o;
  CLI::App app{"Times a fused actor+critic pipeline step against its schedule's prediction (run under mpirun -np N)",
               "bench_pipeline"};
  app.add_option("--config", o.config, "model config (HF config.json keys)")->capture_default_str();
  app.add_option("--dir", o.dir, "folder for the random checkpoints (default: a temporary one)");
  app.add_option("--sequences", o.sequences, "sequences in the mini-batch")->capture_default_str();
  app.add_option("--min-len", o.min_len, "shortest prompt and response")->capture_default_str();
  app.add_option("--max-len", o.max_len, "longest prompt and response")->capture_default_str();
  app.add_option("--micro-batches", o.micro_batches, "micro-batches per step")->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps (after one warm-up)")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads per rank")->capture_default_str();
  app.add_option("--anneal-iterations", o.anneal_iterations, "annealing iterations for the schedule")->capture_default_str();
  return cli::run(app, argc, argv, [&] { return run_bench(o); });
}

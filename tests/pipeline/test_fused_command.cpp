// braid-train's fused path (run_rl with --schedule, train/pipeline_command.cpp) end to end on the ranks of the
// job: shards and a schedule file in, the stage files of both checkpoints and their
// optimizer state out, a rerun skipped, stdin refused.
#define BOOST_TEST_MODULE pipeline_command
#include <boost/test/unit_test.hpp>

#include "fused_setup.hpp"
#include "tests/common/scratch.hpp"

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "comm/mpi.hpp"
#include "core/json.hpp"
#include "io/sample_shard.hpp"
#include "model/config.hpp"
#include "train/optimizer_state.hpp"
#include "train/commands.hpp"
#include "train/train_outputs.hpp"

#include <cmath>
#include <fmt/format.h>
#include "tests/common/mpi_fixture.hpp"

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

double max_diff(model::Model& a, model::Model& b) {
  double worst = 0;
  for (const auto& t : a.tensors()) {
    const auto* u = b.find(t.name);
    BOOST_REQUIRE(u != nullptr);
    for (std::int64_t i = 0; i < t.numel; ++i) worst = std::max(worst, static_cast<double>(std::fabs(t.data[i] - u->data[i])));
  }
  return worst;
}

// A fresh folder of the job's (rank 0 makes it): the tiny actor and critic, two scored shards
// and a schedule of as many devices as ranks; the ppo command over them (two optimizer steps).
train::RlCommand fused_ppo(comm::Communicator& world, const std::string& label) {
  const int n = world.size();
  const auto dir = test::scratch(fmt::format("{}-np{}", label, n));
  if (world.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const char* src = std::getenv("BRAID_SOURCE");
    test::write_actor_critic(model::load_config((std::filesystem::path(src ? src : ".") / "examples/tiny/config.json").string()),
                             dir, 9);
    io::write_sample_shard(dir / "scored-00000.h5", test::scored_samples(8, 3, 8, 259, 4), {.policy_step = 7});
    io::write_sample_shard(dir / "scored-00001.h5", test::scored_samples(5, 3, 8, 259, 6), {.policy_step = 7});
    // schedgen_pipeline.sh passes a schedule braid-schedgen wrote; otherwise the library makes one.
    const char* made = std::getenv("BRAID_PIPELINE_SCHEDULE");
    write_text_file((dir / "schedule.json").string(),
                    made ? read_text_file(made)
                         : test::fused_schedule_json({.devices = n, .actor_stages = n, .critic_stages = n, .micro_batches = 4}));
  }
  world.barrier();

  train::RlCommand c;
  c.inputs = {(dir / "scored-00000.h5").string(), (dir / "scored-00001.h5").string()};
  c.actor = (dir / "actor.h5").string();
  c.critic = (dir / "critic.h5").string();
  c.actor_out = (dir / "actor-1.h5").string();
  c.critic_out = (dir / "critic-1.h5").string();
  c.schedule = (dir / "schedule.json").string();
  c.common.lr = 1e-3;
  c.common.mini_batch = 7;   // two optimizer steps: 7 and 6 sequences
  c.common.created_by = "test_fused_command";
  c.common.stats = (dir / "fused-stats.json").string();
  return c;
}

// The command without --schedule, on rank 0 alone (not data parallel over the job), with
// the single process's default micro-batches, writing one-*.h5.
train::RlCommand one_process(const train::RlCommand& c) {
  const std::filesystem::path dir = std::filesystem::path(c.actor).parent_path();
  train::RlCommand one = c;
  one.schedule.clear();
  one.common.data_parallel = false;
  one.common.micro_tokens = train::CommonTrainOptions{}.micro_tokens;
  one.actor_out = (dir / "one-actor.h5").string();
  one.critic_out = (dir / "one-critic.h5").string();
  one.common.stats = (dir / "one-stats.json").string();
  return one;
}

// The fused run's training steps against the single process's (their --stats files): every
// step's loss within 1e-6 (absolute: a policy loss is a sum of +-A terms near 0, where
// relative error means nothing), gradient norm 1e-5 relative, and the objective's metrics,
// merged over the replicas' last stages as over micro-batches, within 1e-5.
void same_steps(const std::string& fused_stats_file, const std::string& one_stats_file) {
  const json fused_stats = load_json_file(fused_stats_file), one_stats = load_json_file(one_stats_file);
  for (const char* call : {"actor_train", "critic_train"}) {
    const auto& f = fused_stats["calls"][call]["per_step"];
    const auto& o = one_stats["calls"][call]["per_step"];
    BOOST_REQUIRE_EQUAL(f.size(), 2u);
    BOOST_REQUIRE_EQUAL(o.size(), 2u);
    for (std::size_t s = 0; s < 2; ++s) {
      BOOST_TEST_MESSAGE(call << " step " << s << ": loss " << f[s]["loss"] << " / " << o[s]["loss"] << ", |g| "
                              << f[s]["grad_norm"] << " / " << o[s]["grad_norm"]);
        BOOST_TEST(std::abs(f[s]["loss"].get<double>() - o[s]["loss"].get<double>()) <= 1e-6);
      BOOST_TEST(f[s]["grad_norm"].get<double>() == o[s]["grad_norm"].get<double>(), boost::test_tools::tolerance(1e-5));
      // The objective's metrics, merged over the replicas' last stages as over micro-batches.
      for (const char* metric : {"policy_loss", "clip_fraction", "approx_kl", "entropy", "ratio_max",
                                 "value_clip_fraction", "value_error"}) {
        if (!o[s].contains(metric)) continue;
        BOOST_TEST(f[s].contains(metric), call << " step " << s << " lacks " << metric);
        if (f[s].contains(metric)) {
          BOOST_TEST(std::abs(f[s][metric].get<double>() - o[s][metric].get<double>()) <= 1e-5,
                     call << " step " << s << " " << metric << ": " << f[s][metric] << " vs " << o[s][metric]);
        }
      }
    }
  }
}

// The single process of c's run (one_process), run, its steps checked against c's (same_steps).
train::RlCommand run_one_process(const train::RlCommand& c) {
  const train::RlCommand one = one_process(c);
  BOOST_TEST(train::run_rl(one) == 0);
  same_steps(c.common.stats, one.common.stats);
  return one;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fused_ppo_writes_stage_checkpoints_and_skips_a_rerun) {
  auto world = comm::mpi_world();
  const int n = world->size();
  const train::RlCommand c = fused_ppo(*world, "command");
  const auto dir = std::filesystem::path(c.actor).parent_path();
  BOOST_TEST(train::run_rl(c) == 0);

  if (world->rank() == 0) {
    auto be = backend::make_cpu_backend(1);
    for (const auto& [in, out, step] : {std::tuple{c.actor, c.actor_out, 8}, std::tuple{c.critic, c.critic_out, 4}}) {
      auto before = checkpoint::open_model(in, *be);
      auto after = checkpoint::open_model(out, *be);
      BOOST_TEST(after.files.size() == static_cast<std::size_t>(n));
      BOOST_TEST(after.step == step);
      BOOST_TEST(max_diff(*before.model, *after.model) > 1e-4);
      BOOST_TEST(train::checkpoint_complete(out, step));
      // The optimizer took both steps and its state loads back into a whole model.
      optim::AdamW opt(*be, after.model->tensors(), {});
      BOOST_TEST(train::load_optimizer_state(opt, *after.model, out));
      BOOST_TEST(opt.steps_taken() == 2);
    }
  }
  world->barrier();

  // The single process with default flags (one micro-batch per mini-batch, where the
  // schedule cuts each into 4 of uneven lengths) takes the same steps: the losses are
  // means over the whole mini-batch, not over micro-batches. Every step's loss (within
  // 1e-6) and gradient norm (1e-5 relative) agree (the split used to move the norm by 17%), and
  // the weights within 1e-4, a tenth of one step's move at lr 1e-3 (AdamW's first steps
  // move each weight by about ±lr whatever the gradient's size, so elements within
  // rounding of zero may step apart).
  if (world->rank() == 0) {
    const train::RlCommand one = run_one_process(c);
    auto be = backend::make_cpu_backend(1);
    for (const auto& [fused, single] : {std::pair{c.actor_out, one.actor_out}, std::pair{c.critic_out, one.critic_out}}) {
      auto a = checkpoint::open_model(fused, *be);
      auto b = checkpoint::open_model(single, *be);
      const double apart = max_diff(*a.model, *b.model);
      BOOST_TEST_MESSAGE(fused << " vs one process: weights apart by " << apart);
      BOOST_TEST(apart <= 1e-4, fused << " vs one process: weights apart by " << apart);
    }
  }
  world->barrier();

  // A rerun finds both checkpoints complete and writes nothing.
  const auto stamp = std::filesystem::last_write_time(checkpoint::stage_path(c.actor_out, 0, n));
  BOOST_TEST(train::run_rl(c) == 0);
  BOOST_TEST((std::filesystem::last_write_time(checkpoint::stage_path(c.actor_out, 0, n)) == stamp));

  train::RlCommand piped = c;
  piped.inputs = {"-"};
  BOOST_CHECK_THROW(train::run_rl(piped), UsageError);
  train::RlCommand small = c;
  small.common.mini_batch = 3;  // fewer sequences than the schedule's 4 micro-batches
  small.actor_out = (dir / "actor-small.h5").string();
  BOOST_CHECK_THROW(train::run_rl(small), UsageError);

  // bf16 storage (--dtype bf16): every stage trains an f32 master in its optimizer, and the
  // stage files hold the masters (values bf16 cannot hold), near the f32 run's weights.
  train::RlCommand half = c;
  half.common.dtype = backend::DType::bf16;
  half.actor_out = (dir / "actor-bf16.h5").string();
  half.critic_out = (dir / "critic-bf16.h5").string();
  BOOST_TEST(train::run_rl(half) == 0);
  if (world->rank() == 0) {
    auto be = backend::make_cpu_backend(1);
    for (const auto& [in, f32_out, bf16_out] : {std::tuple{c.actor, c.actor_out, half.actor_out},
                                                std::tuple{c.critic, c.critic_out, half.critic_out}}) {
      auto before = checkpoint::open_model(in, *be);
      auto full = checkpoint::open_model(f32_out, *be);
      auto mixed = checkpoint::open_model(bf16_out, *be);
      BOOST_TEST(mixed.files.size() == static_cast<std::size_t>(n));
      const double moved = max_diff(*before.model, *full.model);
      BOOST_TEST(max_diff(*before.model, *mixed.model) > 0.5 * moved);
      // Apart by the bf16 rounding of the start weights (2^-9 relative) and the updates.
      double largest = 0;
      for (const auto& t : before.model->tensors())
        for (std::int64_t i = 0; i < t.numel; ++i) largest = std::max(largest, double(std::fabs(t.data[i])));
      BOOST_TEST(max_diff(*full.model, *mixed.model) < 2 * moved + largest / 256);
      std::int64_t beyond_bf16 = 0;
      for (const auto& t : mixed.model->tensors())
        for (std::int64_t i = 0; i < t.numel; ++i)
          beyond_bf16 += backend::bf16_to_float(backend::float_to_bf16(t.data[i])) != t.data[i];
      BOOST_TEST(beyond_bf16 > 0);
    }
  }
  world->barrier();
}

// LoRA adapters (rank 2 on every module; the critic's value head trained beside them) in the
// fused pipeline: the stages train their adapters alone and write one adapter file per
// model, naming its base, as the single process writes it: every adapter within 1e-4 and
// 1% of the largest B (measured at most 1.6e-6 of 2e-3), the steps' losses within 1e-6 and gradient norms
// 1e-5 relative, the optimizer state (per stage) loading into the whole adapter model.
BOOST_AUTO_TEST_CASE(fused_lora_ppo_writes_the_single_process_adapter_files) {
  auto world = comm::mpi_world();
  train::RlCommand c = fused_ppo(*world, "command-lora");
  c.common.lora = {.rank = 2, .alpha = 4};
  BOOST_TEST(train::run_rl(c) == 0);
  if (world->rank() == 0) {
    const train::RlCommand one = run_one_process(c);
    auto be = backend::make_cpu_backend(1);
    for (const auto& [fused, single] : {std::pair{c.actor_out, one.actor_out}, std::pair{c.critic_out, one.critic_out}}) {
      BOOST_TEST(checkpoint::checkpoint_files(fused).size() == 1u);   // one adapter file, whatever the stages
      const io::WeightShardSet a({fused}), b({single});
      BOOST_TEST(a.shards().front().meta().kind == "adapters");
      BOOST_REQUIRE(a.names() == b.names());
      double apart = 0, moved = 0;
      for (const auto& name : a.names()) {
        BOOST_REQUIRE(a.shape(name) == b.shape(name));
        const auto x = a.read(name), y = b.read(name);
        for (std::size_t i = 0; i < x.size(); ++i) {
          apart = std::max(apart, double(std::fabs(x[i] - y[i])));
          if (name.find("lora_B") != std::string::npos) moved = std::max(moved, double(std::fabs(y[i])));
        }
      }
      BOOST_TEST_MESSAGE(fused << " vs one process: adapters apart by " << apart << " (B moved to " << moved << ")");
      BOOST_TEST(apart <= 1e-4);
      // B starts at zero; two AdamW steps move an element by up to about 2 lr (the actor's
      // 1e-3, the critic's 5e-5): far more than the bound's share of it.
      BOOST_TEST(moved > 5e-5);
      BOOST_TEST(apart <= 1e-2 * moved);
      auto opened = checkpoint::open_model(fused, *be);
      optim::AdamW opt(*be, opened.model->adapters(), {});
      BOOST_TEST(train::load_optimizer_state(opt, *opened.model, fused));
      BOOST_TEST(opt.steps_taken() == 2);
    }
  }
  world->barrier();
}

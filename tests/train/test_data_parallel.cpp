// Data parallelism (train/trainer.hpp, optim/adamw.hpp: ZeRO stage 1) gives the single
// process's training on the same global mini-batches. One program, run alone (a world
// of one) and under mpirun with 2 and 3 ranks: on every rank it trains a model twice
// from the same weights, once alone (no communicator: the reference) and once data
// parallel over all ranks, for every objective braid-train has (PPO actor and critic,
// GRPO, reward model, SFT, DPO), over three mini-batches: 5 groups (uneven over 2 and 3
// ranks), 2 groups (one of 3 ranks gets nothing) and all 14 (7 pairs). Clipping and
// weight decay are on, micro-batches are small (several per rank) and gradient buckets
// short (several per all-reduce).
//
// Tolerances (the figures are printed with --log_level=message): weights after the
// three steps within 2e-6 absolute (measured at most 2e-7 over 2 and 3 ranks: float
// sums taken in another order, which AdamW with eps 1e-3 may magnify up to lr/eps = 10
// times); losses and gradient norms per step within 1e-5 relative, metrics 1e-4; the
// moments within 1e-5 of their largest element (measured 1e-6). Tokens and sequences
// per step are equal exactly.
#define BOOST_TEST_MODULE train_data_parallel
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "comm/mpi.hpp"
#include "core/rng.hpp"
#include "io/weight_shard.hpp"
#include "train/objectives.hpp"
#include "tests/train/uneven_batch.hpp"
#include "train/optimizer_state.hpp"
#include "train/train_outputs.hpp"
#include "train/trainer.hpp"
#include "tests/common/mpi_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

using braid::test::tiny;
using braid::test::uneven_batch;

struct Case {
  const char* name;
  bool value_head;
  std::size_t group;
  std::function<std::unique_ptr<train::Objective>()> make;
};

std::vector<Case> cases() {
  return {
      {"ppo actor", false, 1, [] { return std::make_unique<train::PolicyObjective>(train::ppo_actor_options(0.2, 0.01)); }},
      {"ppo critic", true, 1, [] { return std::make_unique<train::ValueObjective>(0.2); }},
      {"grpo actor", false, 1, [] { return std::make_unique<train::PolicyObjective>(train::grpo_actor_options(0.2, 0.1)); }},
      {"reward model", true, 2, [] { return std::make_unique<train::PairwiseRewardObjective>(); }},
      {"sft", false, 1, [] { return std::make_unique<train::SftObjective>(16); }},
      {"dpo", false, 2,
       [] { return std::make_unique<train::DpoObjective>(train::DpoObjectiveOptions{.loss = {.beta = 0.5}, .head_chunk_rows = 16}); }},
  };
}

// Three mini-batches of whole groups in a shuffled order: 5 groups, 2 groups, all.
std::vector<std::vector<std::size_t>> mini_batches(std::size_t sequences, std::size_t group) {
  std::vector<std::size_t> order(sequences / group);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(3);
  rng.shuffle(std::span<std::size_t>(order));
  auto take = [&](std::size_t first, std::size_t count) {
    std::vector<std::size_t> idx;
    for (std::size_t g = first; g < first + count; ++g)
      for (std::size_t k = 0; k < group; ++k) idx.push_back(order[g] * group + k);
    return idx;
  };
  return {take(0, 5), take(5, 2), take(0, order.size())};
}

struct Run {
  std::vector<float> weights, exp_avg, exp_avg_sq;
  std::vector<train::StepStats> steps;
  std::int64_t shard = 0, state_bytes = 0, total = 0;
};

train::TrainerOptions options(std::size_t group, comm::Communicator* dp) {
  train::TrainerOptions opt;
  opt.lr = {.peak_lr = 1e-2, .min_lr = 1e-2, .kind = optim::LrSchedule::Kind::constant};
  opt.adamw.eps = 1e-3;
  opt.adamw.max_grad_norm = 0.5;   // clipping on: the norm must be the global one
  opt.adamw.weight_decay = 0.05;
  opt.micro = {.max_tokens = 64, .max_sequences = 0, .group = group};
  opt.data_parallel = {.comm = dp, .bucket_elements = 1000};
  return opt;
}

// The whole moments on every rank: each rank in turn the root of gather_state.
void whole_state(optim::AdamW& opt, std::vector<float>& exp_avg, std::vector<float>& exp_avg_sq) {
  exp_avg.assign(std::size_t(opt.parameter_count()), 0.0f);
  exp_avg_sq.assign(exp_avg.size(), 0.0f);
  for (int q = 0; q < opt.dp_size(); ++q) {
    if (q == opt.dp_rank()) opt.gather_state(q, exp_avg, exp_avg_sq);
    else opt.gather_state(q, {}, {});
  }
}

// Trains a fresh model (same weights every time) over the mini-batches; `after` (if set)
// gets the model and its trainer before they go.
Run train_case(const Case& c, const io::SampleBatch& batch, comm::Communicator* dp,
               backend::DType dtype = backend::DType::f32,
               const std::function<void(model::Model&, train::Trainer&)>& after = {}) {
  auto be = backend::make_cpu_backend(1);
  model::Model m(tiny(), {.lm_head = !c.value_head, .value_head = c.value_head, .dtype = dtype}, *be);
  m.init_random(11, 0.1);
  auto obj = c.make();
  train::Trainer t(m, *obj, options(c.group, dp));
  Run r;
  for (const auto& idx : mini_batches(batch.size(), c.group)) r.steps.push_back(t.step(batch, idx));
  optim::AdamW& opt = t.optimizer();
  for (int q = 0; q < opt.dp_size(); ++q) opt.gather_masters(q);   // every rank its whole master
  for (const auto& tensor : m.tensors()) {
    std::vector<float> v(static_cast<std::size_t>(tensor.numel));
    model::read_values(*be, tensor, v.data());
    r.weights.insert(r.weights.end(), v.begin(), v.end());
  }
  r.total = opt.parameter_count();
  whole_state(opt, r.exp_avg, r.exp_avg_sq);
  r.shard = opt.shard_size();
  r.state_bytes = opt.state_bytes();
  if (after) after(m, t);
  return r;
}

double largest(std::span<const float> a) {
  double d = 0;
  for (float x : a) d = std::max(d, double(std::abs(x)));
  return d;
}

double max_difference(std::span<const float> a, std::span<const float> b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

void expect_same_training(const char* name, const Run& one, const Run& dp, int ranks) {
  const double dw = max_difference(one.weights, dp.weights);
  const double dm = max_difference(one.exp_avg, dp.exp_avg), dv = max_difference(one.exp_avg_sq, dp.exp_avg_sq);
  BOOST_TEST_MESSAGE(name << " over " << ranks << " ranks: weights apart " << dw << ", exp_avg " << dm << " (largest "
                          << largest(one.exp_avg) << "), exp_avg_sq " << dv << " (largest " << largest(one.exp_avg_sq)
                          << ")");
  BOOST_TEST(dw <= 2e-6, name << ": weights apart by " << dw);
  BOOST_TEST(dm <= 1e-5 * largest(one.exp_avg), name << ": exp_avg apart by " << dm);
  BOOST_TEST(dv <= 1e-5 * largest(one.exp_avg_sq), name << ": exp_avg_sq apart by " << dv);
  BOOST_REQUIRE_EQUAL(one.steps.size(), dp.steps.size());
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    const auto &a = one.steps[s], &b = dp.steps[s];
    BOOST_TEST_MESSAGE("  step " << s << ": loss " << a.loss << " vs " << b.loss << ", |g| " << a.grad_norm << " vs "
                                 << b.grad_norm);
    BOOST_TEST(b.loss == a.loss, name << " step " << s << boost::test_tools::tolerance(1e-5));
    BOOST_TEST(b.grad_norm == a.grad_norm, name << " step " << s << boost::test_tools::tolerance(1e-5));
    BOOST_TEST(b.tokens == a.tokens);
    BOOST_TEST(b.sequences == a.sequences);
    BOOST_TEST(b.micro_batches >= a.micro_batches);
    for (const auto& [k, v] : a.metrics) {
      BOOST_REQUIRE(b.metrics.count(k) == 1);
      BOOST_TEST(b.metrics.at(k) == v, name << " step " << s << " metric " << k << boost::test_tools::tolerance(1e-4));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_objective_trains_as_the_single_process_does) {
  auto world = comm::mpi_world();
  const io::SampleBatch batch = uneven_batch(5);
  for (const Case& c : cases()) {
    const Run one = train_case(c, batch, nullptr);
    const Run dp = train_case(c, batch, world.get());
    BOOST_TEST(largest(one.exp_avg) > 1e-4, c.name << ": the moments are not trivially zero");
    expect_same_training(c.name, one, dp, world->size());
  }
}

BOOST_AUTO_TEST_CASE(the_optimizer_state_is_sharded) {
  auto world = comm::mpi_world();
  const int n = world->size();
  const Case c = cases()[4];   // sft
  const Run dp = train_case(c, uneven_batch(5), world.get());
  // Rank r holds elements [P·r/n, P·(r+1)/n): the shards cover the parameters once.
  std::vector<std::int64_t> shards{dp.shard};
  world->all_reduce_sum(std::span<std::int64_t>(shards));
  BOOST_TEST(shards[0] == dp.total);
  BOOST_TEST(dp.shard >= dp.total / n);
  BOOST_TEST(dp.shard <= dp.total / n + 1);
  BOOST_TEST(dp.state_bytes == 2 * 4 * dp.shard);   // two f32 moments; f32 weights are their own master
  const Run bf16 = train_case(c, uneven_batch(5), world.get(), backend::DType::bf16);
  BOOST_TEST(bf16.state_bytes == 3 * 4 * bf16.shard);   // and the f32 master of the shard
}

BOOST_AUTO_TEST_CASE(bf16_weights_train_as_the_single_process_does) {
  // The masters are sharded, the bf16 compute copy all-gathered; gather_masters puts
  // the whole f32 master where a checkpoint reads it, on the rank asked.
  auto world = comm::mpi_world();
  const io::SampleBatch batch = uneven_batch(5);
  for (const Case& c : {cases()[0], cases()[4]}) {
    const Run one = train_case(c, batch, nullptr, backend::DType::bf16);
    const Run dp = train_case(c, batch, world.get(), backend::DType::bf16);
    expect_same_training(c.name, one, dp, world->size());
  }
}

BOOST_AUTO_TEST_CASE(one_rank_writes_the_checkpoint_and_it_loads_anywhere) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  const char* scratch = std::getenv("BRAID_SCRATCH");
  BOOST_REQUIRE(scratch != nullptr);
  const std::filesystem::path dir = std::filesystem::path(scratch) / "data_parallel";
  if (r == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  world->barrier();
  // Each rank names its own path: only the lead's may appear.
  auto path_of = [&](int q) { return dir / ("ckpt-rank" + std::to_string(q) + ".h5"); };
  const Case c = cases()[4];   // sft
  const io::SampleBatch batch = uneven_batch(5);
  const Run one = train_case(c, batch, nullptr);
  train_case(c, batch, world.get(), backend::DType::f32, [&](model::Model& m, train::Trainer& t) {
    train::save_checkpoint(m, t.optimizer(), path_of(r), {.step = 1, .created_by = "test"}, r == 0);
  });
  world->barrier();
  BOOST_TEST(std::filesystem::exists(path_of(0)));
  BOOST_TEST(std::filesystem::exists(checkpoint::optimizer_state_path(path_of(0))));
  for (int q = 1; q < n; ++q) {
    BOOST_TEST(!std::filesystem::exists(path_of(q)), "rank " << q << " wrote its checkpoint");
    BOOST_TEST(!std::filesystem::exists(checkpoint::optimizer_state_path(path_of(q))));
  }
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  BOOST_TEST(files == 2u, "files in the folder: " << files);

  // The file holds the whole state: a single process reads the reference's moments
  // back (to rounding), and a data-parallel optimizer keeps its shard of them.
  auto be = backend::make_cpu_backend(1);
  for (comm::Communicator* dp : {static_cast<comm::Communicator*>(nullptr), world.get()}) {
    const checkpoint::OpenedModel opened = checkpoint::open_model(path_of(0), *be, {}, true, false);
    optim::AdamW opt(*be, opened.model->tensors(), {}, {.comm = dp});
    BOOST_REQUIRE(train::load_optimizer_state(opt, *opened.model, path_of(0)));
    BOOST_TEST(opt.steps_taken() == 3);
    std::vector<float> m, v;
    whole_state(opt, m, v);
    BOOST_TEST(max_difference(m, one.exp_avg) <= 1e-5 * largest(one.exp_avg));
    BOOST_TEST(max_difference(v, one.exp_avg_sq) <= 1e-5 * largest(one.exp_avg_sq));
    const auto w = opened.model->parameters();
    BOOST_TEST(max_difference(std::vector<float>(w.begin(), w.end()), one.weights) <= 2e-6);
  }
  world->barrier();
}

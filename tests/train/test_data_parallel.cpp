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
#include "tests/common/arrays.hpp"
#include "tests/common/scratch.hpp"
#include "tests/train/objective_cases.hpp"

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

using namespace braid::test;

// Three mini-batches of whole groups in a shuffled order: 5 groups, 2 groups, all.
constexpr std::pair<std::size_t, std::size_t> kMiniBatches[] = {{0, 5}, {5, 2}, {0, 0}};

struct Run {
  std::vector<float> weights, exp_avg, exp_avg_sq;
  std::vector<train::StepStats> steps;
  std::int64_t shard = 0, state_bytes = 0, total = 0;
};

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
Run train_case(const ObjectiveCase& c, const io::SampleBatch& batch, comm::Communicator* dp,
               backend::DType dtype = backend::DType::f32,
               const std::function<void(model::Model&, train::Trainer&)>& after = {}) {
  auto be = backend::make_cpu_backend(1);
  model::Model m(tiny(), {.lm_head = !c.value_head, .value_head = c.value_head, .dtype = dtype}, *be);
  m.init_random(11, 0.1);
  auto obj = c.make();
  train::Trainer t(m, *obj, test::parallel_options(c.group, dp));
  Run r;
  for (const auto& idx : test::group_mini_batches(batch.size(), c.group, kMiniBatches)) {
    r.steps.push_back(t.step(batch, idx));
  }
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

void expect_same_training(const char* name, const Run& one, const Run& dp, int ranks) {
  const double dw = max_difference(one.weights, dp.weights);
  const double dm = max_difference(one.exp_avg, dp.exp_avg), dv = max_difference(one.exp_avg_sq, dp.exp_avg_sq);
  BOOST_TEST_MESSAGE(name << " over " << ranks << " ranks: weights apart " << dw << ", exp_avg " << dm << " (largest "
                          << largest(one.exp_avg) << "), exp_avg_sq " << dv << " (largest " << largest(one.exp_avg_sq)
                          << ")");
  BOOST_TEST(dw <= 2e-6, name << ": weights apart by " << dw);
  BOOST_TEST(dm <= 1e-5 * largest(one.exp_avg), name << ": exp_avg apart by " << dm);
  BOOST_TEST(dv <= 1e-5 * largest(one.exp_avg_sq), name << ": exp_avg_sq apart by " << dv);
  test::expect_same_steps(name, one.steps, dp.steps);
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    BOOST_TEST(dp.steps[s].micro_batches >= one.steps[s].micro_batches);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_objective_trains_as_the_single_process_does) {
  auto world = comm::mpi_world();
  const io::SampleBatch batch = uneven_batch(5);
  for (const ObjectiveCase& c : objective_cases()) {
    const Run one = train_case(c, batch, nullptr);
    const Run dp = train_case(c, batch, world.get());
    BOOST_TEST(largest(one.exp_avg) > 1e-4, c.name << ": the moments are not trivially zero");
    expect_same_training(c.name, one, dp, world->size());
  }
}

BOOST_AUTO_TEST_CASE(the_optimizer_state_is_sharded) {
  auto world = comm::mpi_world();
  const int n = world->size();
  const ObjectiveCase c = objective_cases()[4];   // sft
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
  for (const ObjectiveCase& c : {objective_cases()[0], objective_cases()[4]}) {
    const Run one = train_case(c, batch, nullptr, backend::DType::bf16);
    const Run dp = train_case(c, batch, world.get(), backend::DType::bf16);
    expect_same_training(c.name, one, dp, world->size());
  }
}

BOOST_AUTO_TEST_CASE(one_rank_writes_the_checkpoint_and_it_loads_anywhere) {
  auto world = comm::mpi_world();
  const int r = world->rank(), n = world->size();
  const std::filesystem::path dir = test::scratch("data_parallel");
  if (r == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  world->barrier();
  // Each rank names its own path: only the lead's may appear.
  auto path_of = [&](int q) { return dir / ("ckpt-rank" + std::to_string(q) + ".h5"); };
  const ObjectiveCase c = objective_cases()[4];   // sft
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

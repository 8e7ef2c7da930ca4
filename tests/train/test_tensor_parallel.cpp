// Tensor-parallel training (train/trainer.hpp under ModelOptions::tp, optim/adamw.hpp's
// norm over the tp group, docs/parallel.md) gives the single process's training on the
// same global mini-batches. One program, run alone and under mpirun with 2 and 4 ranks:
// on every rank it trains the whole model alone (the reference) and then, for every
// layout devices x tp of the job's ranks with tp > 1 (np 2: tp 2; np 4: tp 4, and 2
// devices x tp 2, data parallel over the cross group), the same weights split over the
// tp group, for every objective braid-train has (PPO actor and critic, GRPO, reward
// model, SFT, DPO), over two mini-batches (5 groups, then 2). Clipping is on (the norm
// must be the whole model's), and so is weight decay.
//
// The model has 8 query / 4 key-value heads, 42 intermediate units and 67 vocabulary
// rows, so that at tp 4 the units and rows are cut unevenly.
//
// Tolerances (the figures are printed with --log_level=message): every rank's slice of
// every tensor after the two steps within 2e-6 absolute of the whole model's (weights
// of scale 0.1-0.3: ~1e-5 relative; float sums taken in another order, which AdamW
// with eps 1e-3 may magnify up to lr/eps = 10 times); losses and gradient norms per step
// within 1e-5 relative, metrics 1e-4; the moments within 1e-5 of their largest element.
// Measured: weights at most 2.7e-7 apart, moments 1.1e-6 of their largest. The replicated tensors are bit-equal on every tp rank (else a checkpoint's slices
// would not reshard). The checkpoint and its optimizer state written at tp, resharded
// to tp 1, equal the whole run's to the same tolerances, and a tp 1 optimizer state
// opens at every tp rank as exactly its slices.
//
// LoRA (rank 2 on every module; the value head trained beside the adapters): the same runs
// train the adapters alone, to the same tolerances (measured: adapters at most 3.6e-7
// apart, moments 7.5e-9 absolute). The adapter file written at tp is whole, one file the
// shape of the whole run's (within 2e-6), and opens at each tp rank as that rank's slices.
#define BOOST_TEST_MODULE train_tensor_parallel
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/reshard.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "model/tensor_parallel.hpp"
#include "tests/common/mpi_fixture.hpp"
#include "tests/common/arrays.hpp"
#include "tests/common/scratch.hpp"
#include "tests/train/objective_cases.hpp"
#include "tests/train/uneven_batch.hpp"
#include "train/objectives.hpp"
#include "train/optimizer_state.hpp"
#include "train/train_outputs.hpp"
#include "train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

using namespace braid::test;

// Two mini-batches of whole groups in a shuffled order: 5 groups, then 2.
constexpr std::pair<std::size_t, std::size_t> kMiniBatches[] = {{0, 5}, {5, 2}};

model::ModelConfig config() {
  model::ModelConfig c = braid::test::tiny();
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.intermediate_size = 42;
  c.vocab_size = 67;
  return c;
}

// A trained model (this rank's slices) with its trainer and the steps' stats.
struct Run {
  std::unique_ptr<backend::Backend> be;
  std::unique_ptr<model::Model> m;
  std::unique_ptr<train::Objective> obj;
  std::unique_ptr<train::Trainer> trainer;
  std::vector<train::StepStats> steps;
};

// With `lora` (rank > 0) the model trains adapters (B random, so that every adapter's
// gradient is there from the first step) and, for a value head, the head beside them.
Run train_case(const ObjectiveCase& c, const io::SampleBatch& batch, const comm::Mesh* mesh,
               model::LoraOptions lora = {}) {
  Run r;
  r.be = backend::make_cpu_backend(1);
  model::TensorParallel tp;
  if (mesh) tp = {mesh->tp_size(), mesh->tp_rank(), mesh->tp_group()};
  lora.value_head = lora.enabled() && c.value_head;
  r.m = std::make_unique<model::Model>(
      config(), model::ModelOptions{.lm_head = !c.value_head, .value_head = c.value_head, .tp = tp, .lora = lora}, *r.be);
  r.m->init_random(11, 0.1);   // the whole model's weights, this rank's slices of them
  if (lora.enabled()) r.m->init_adapters(13, 0.1);
  r.obj = c.make();
  r.trainer = std::make_unique<train::Trainer>(*r.m, *r.obj, test::parallel_options(c.group, mesh ? mesh->cross_group() : nullptr));
  for (const auto& idx : test::group_mini_batches(batch.size(), c.group, kMiniBatches)) {
    r.steps.push_back(r.trainer->step(batch, idx));
  }
  return r;
}

// The whole moments of this rank's parameter array (each data-parallel rank in turn the root).
std::pair<std::vector<float>, std::vector<float>> whole_state(optim::AdamW& opt) {
  std::vector<float> m(std::size_t(opt.parameter_count())), v(m.size());
  for (int q = 0; q < opt.dp_size(); ++q) {
    if (q == opt.dp_rank()) opt.gather_state(q, m, v);
    else opt.gather_state(q, {}, {});
  }
  return {m, v};
}

// The worst |slice - whole's slice| over the trained tensors of `part` (a tp model; its
// adapters under LoRA) against `whole`, for per-tensor arrays laid out in their order
// (weights or a moment).
double max_slice_difference(const model::Model& part, std::span<const float> part_values, const model::Model& whole,
                            std::span<const float> whole_values) {
  std::map<std::string, std::size_t> whole_offset;
  std::size_t off = 0;
  for (const auto& t : checkpoint::trained_tensors(whole)) {
    whole_offset[t.name] = off;
    off += std::size_t(t.numel);
  }
  BOOST_REQUIRE_EQUAL(off, whole_values.size());
  double worst = 0;
  off = 0;
  for (const auto& t : checkpoint::trained_tensors(part)) {
    const auto want = model::extract_slice(whole_values.data() + whole_offset.at(t.name), t.full_shape, t.slice);
    BOOST_REQUIRE_EQUAL(want.size(), std::size_t(t.numel));
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::abs(part_values[off + i] - want[i])));
    off += std::size_t(t.numel);
  }
  return worst;
}

std::vector<float> weights_of(const model::Model& m) {
  std::vector<float> out;
  for (const auto& t : checkpoint::trained_tensors(m)) {
    std::vector<float> v(static_cast<std::size_t>(t.numel));
    model::read_values(m.backend(), t, v.data());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}


// Whether every replicated tensor is bit-equal to tp rank 0's copy (on every rank).
bool replicated_tensors_agree(const model::Model& m, comm::Communicator& tp_group) {
  std::int64_t differ = 0;
  for (const auto& t : checkpoint::trained_tensors(m)) {
    if (t.slice.split()) continue;
    std::vector<float> mine(std::size_t(t.numel)), root;
    model::read_values(m.backend(), t, mine.data());
    root = mine;
    tp_group.broadcast(std::span<float>(root), 0);
    if (std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)) != 0) differ = 1;
  }
  tp_group.all_reduce(std::span<std::int64_t>(&differ, 1), comm::ReduceOp::max);
  return differ == 0;
}

// The layouts devices x tp of the job's ranks with tp > 1 that the model splits into.
std::vector<int> tp_degrees(int ranks) {
  std::vector<int> out;
  for (int tp = 2; tp <= ranks; ++tp)
    if (ranks % tp == 0 && config().num_key_value_heads % tp == 0) out.push_back(tp);
  return out;
}

// A fresh scratch folder NAME, made by rank 0 before any rank uses it.
std::filesystem::path fresh_folder(comm::Communicator& world, const std::string& name) {
  if (world.rank() == 0) test::fresh_scratch(name);
  world.barrier();
  return test::scratch(name);
}

}  // namespace

namespace {

// Every objective trained whole and over each tp layout of the job (with `lora`: the adapters
// alone, and the value head beside them): the trained tensors, their moments, the steps.
void check_every_objective(const model::LoraOptions& lora) {
  auto world = comm::mpi_world();
  const io::SampleBatch batch = uneven_batch(5);
  if (tp_degrees(world->size()).empty()) BOOST_TEST_MESSAGE("one rank: no tp layout to compare");
  for (const int tp : tp_degrees(world->size())) {
    comm::Mesh mesh(*world, tp);
    for (const ObjectiveCase& c : objective_cases()) {
      const std::string name = fmt::format("{}{} at {}", c.name, lora.enabled() ? " (LoRA)" : "", mesh.describe());
      Run one = train_case(c, batch, nullptr, lora);
      Run split = train_case(c, batch, &mesh, lora);
      const double dw = max_slice_difference(*split.m, weights_of(*split.m), *one.m, weights_of(*one.m));
      const auto [m1, v1] = whole_state(one.trainer->optimizer());
      const auto [mt, vt] = whole_state(split.trainer->optimizer());
      const double dm = max_slice_difference(*split.m, mt, *one.m, m1);
      const double dv = max_slice_difference(*split.m, vt, *one.m, v1);
      BOOST_TEST_MESSAGE(name << ": weights apart " << dw << ", exp_avg " << dm << " (largest " << largest(m1)
                              << "), exp_avg_sq " << dv << " (largest " << largest(v1) << ")");
      BOOST_TEST(dw <= 2e-6, name << ": weights apart by " << dw);
      BOOST_TEST(largest(m1) > 1e-4, name << ": the moments are not trivially zero");
      BOOST_TEST(dm <= 1e-5 * largest(m1), name << ": exp_avg apart by " << dm);
      BOOST_TEST(dv <= 1e-5 * largest(v1), name << ": exp_avg_sq apart by " << dv);
      BOOST_TEST(replicated_tensors_agree(*split.m, *mesh.tp_group()), name << ": replicated tensors differ between tp ranks");
      test::expect_same_steps(name, one.steps, split.steps);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_objective_trains_as_the_whole_model_does) {
  check_every_objective({});
}

// LoRA adapters (rank 2 on every module) cut as the matrices they adapt: the same tolerances.
BOOST_AUTO_TEST_CASE(lora_adapters_train_as_the_whole_models_do) {
  check_every_objective({.rank = 2, .alpha = 4});
}

// Each tp rank of device 0 writes its slices of the checkpoint and the optimizer state;
// both reshard to tp 1 as the whole run's, and a whole optimizer state opens sliced.
BOOST_AUTO_TEST_CASE(tp_checkpoints_reshard_to_the_whole_runs) {
  auto world = comm::mpi_world();
  for (const int tp : tp_degrees(world->size())) {
    comm::Mesh mesh(*world, tp);
    const auto dir = fresh_folder(*world, fmt::format("train-tp-np{}-tp{}", world->size(), tp));
    const ObjectiveCase c = objective_cases()[0];   // the PPO actor: every kind of tensor but score.weight
    const io::SampleBatch batch = uneven_batch(5);
    Run one = train_case(c, batch, nullptr);
    Run split = train_case(c, batch, &mesh);
    const auto whole_out = dir / "whole.h5", tp_out = dir / "tp.h5";
    if (world->rank() == 0) train::save_checkpoint(*one.m, one.trainer->optimizer(), whole_out, {.step = 1});
    const auto files = train::save_checkpoint(*split.m, split.trainer->optimizer(), tp_out, {.step = 1},
                                              mesh.device() == 0);
    BOOST_TEST(files[0] == checkpoint::tp_path(tp_out, mesh.tp_rank(), tp));
    BOOST_TEST(files[1] == checkpoint::tp_path(dir / "tp.optim.h5", mesh.tp_rank(), tp));
    world->barrier();

    if (world->rank() == 0) {
      checkpoint::reshard(checkpoint::checkpoint_files(tp_out), dir / "back.h5", {.tp = 1}, "test");
      checkpoint::reshard(checkpoint::checkpoint_files(dir / "tp.optim.h5"), dir / "back.optim.h5", {.tp = 1}, "test");
      auto be = backend::make_cpu_backend(1);
      const auto whole = checkpoint::open_model(whole_out, *be), back = checkpoint::open_model(dir / "back.h5", *be);
      const double dw = max_slice_difference(*back.model, weights_of(*back.model), *whole.model, weights_of(*whole.model));
      optim::AdamW a(*be, whole.model->tensors(), {}), b(*be, back.model->tensors(), {});
      BOOST_REQUIRE(train::load_optimizer_state(a, *whole.model, whole_out));
      BOOST_REQUIRE(train::load_optimizer_state(b, *back.model, dir / "back.h5"));
      BOOST_TEST(b.steps_taken() == 2);
      const double dm = max_slice_difference(*back.model, b.first_moment(), *whole.model, a.first_moment());
      BOOST_TEST_MESSAGE("tp " << tp << " checkpoint resharded to tp 1: weights apart " << dw << ", exp_avg " << dm);
      BOOST_TEST(dw <= 2e-6);
      BOOST_TEST(dm <= 1e-5 * largest(a.first_moment()));
    }
    world->barrier();

    // The whole run's optimizer state (tp 1) opens at each tp rank as exactly its slices.
    optim::AdamW fresh(*split.be, split.m->tensors(), {}, {}, split.m->tensor_parallel());
    BOOST_REQUIRE(train::load_optimizer_state(fresh, *split.m, whole_out));
    const auto [m1, v1] = whole_state(one.trainer->optimizer());
    BOOST_TEST(max_slice_difference(*split.m, fresh.first_moment(), *one.m, m1) == 0.0);
    BOOST_TEST(max_slice_difference(*split.m, fresh.second_moment(), *one.m, v1) == 0.0);
    world->barrier();
  }
}

// A LoRA run's checkpoint at tp: one whole adapter file (tp rank 0 writes what the group
// gathers) beside every rank's optimizer state; the file holds the whole run's adapters, and
// opened at each tp rank on the base it is the rank's adapters exactly.
BOOST_AUTO_TEST_CASE(lora_adapter_files_written_at_tp_are_whole) {
  auto world = comm::mpi_world();
  for (const int tp : tp_degrees(world->size())) {
    comm::Mesh mesh(*world, tp);
    const auto dir = fresh_folder(*world, fmt::format("train-tp-lora-np{}-tp{}", world->size(), tp));
    const ObjectiveCase c = objective_cases()[1];   // the PPO critic: adapters and the value head's copy
    const model::LoraOptions lora{.rank = 2, .alpha = 4};
    const io::SampleBatch batch = uneven_batch(5);
    Run one = train_case(c, batch, nullptr, lora);
    Run split = train_case(c, batch, &mesh, lora);
    const auto base = dir / "base.h5", whole_out = dir / "whole.h5", tp_out = dir / "tp.h5";
    if (world->rank() == 0) {
      checkpoint::save_weights(*one.m, base);   // the base: the same weights in both runs
      train::save_checkpoint(*one.m, one.trainer->optimizer(), whole_out, {.step = 1, .base = base});
    }
    const auto files = train::save_checkpoint(*split.m, split.trainer->optimizer(), tp_out, {.step = 1, .base = base},
                                              mesh.device() == 0);
    BOOST_TEST(files[0] == tp_out);
    BOOST_TEST(files[1] == checkpoint::tp_path(dir / "tp.optim.h5", mesh.tp_rank(), tp));
    world->barrier();
    BOOST_TEST(!std::filesystem::exists(checkpoint::tp_path(tp_out, mesh.tp_rank(), tp)));
    const io::WeightShardSet want({whole_out}), got({tp_out});
    BOOST_REQUIRE(want.names() == got.names());
    double worst = 0;
    for (const auto& name : want.names()) {
      BOOST_REQUIRE(want.shape(name) == got.shape(name));
      const auto x = want.read(name), y = got.read(name);
      for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::abs(x[i] - y[i])));
    }
    BOOST_TEST_MESSAGE("LoRA at tp " << tp << ": the adapter file within " << worst << " of the whole run's");
    BOOST_TEST(worst <= 2e-6);
    const auto opened = checkpoint::open_model(tp_out, *split.be, {}, false, true, backend::DType::f32,
                                               split.m->tensor_parallel());
    BOOST_TEST(weights_of(*opened.model) == weights_of(*split.m));
    world->barrier();
  }
}

// Layouts braid-train refuses before any model is built (exit 2 in the tool): ranks that
// do not split into tp groups, and a model whose key/value heads tp does not divide.
BOOST_AUTO_TEST_CASE(layouts_that_do_not_split_are_refused) {
  auto world = comm::mpi_world();
  BOOST_CHECK_THROW(comm::Mesh(*world, world->size() + 1), UsageError);
  BOOST_CHECK_THROW(model::check_tensor_parallel(config(), 3), std::invalid_argument);
  BOOST_CHECK_NO_THROW(model::check_tensor_parallel(config(), 4));
}

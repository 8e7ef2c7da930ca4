// The proof of the fused pipeline: one step over a fused actor + critic schedule, run
// on as many MPI ranks as the schedule has devices, updates both models exactly as a
// single process does on the same micro-batches (to float tolerance), for PPO's
// objectives; and schedules that do not fit the job or the data are refused.
#define BOOST_TEST_MODULE pipeline
#include <boost/test/unit_test.hpp>

#include "fused_setup.hpp"
#include "tests/common/scratch.hpp"

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "comm/mpi.hpp"
#include "data/micro_batches.hpp"
#include "train/objectives.hpp"
#include "train/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <fmt/format.h>
#include "tests/common/mpi_fixture.hpp"

using namespace braid;

namespace {

using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

model::ModelConfig tiny_config() {
  const char* src = std::getenv("BRAID_SOURCE");
  return model::load_config((std::filesystem::path(src ? src : ".") / "examples/tiny/config.json").string());
}

constexpr double kActorLr = 1e-3, kCriticLr = 2e-3;
constexpr std::int64_t kMaxTokens = 256, kMaxSequences = 8;

// AdamW's first step moves a weight by about lr * g / (|g| + eps): sign(g) once |g| >> eps.
// A gradient within float rounding of zero could then step either way, so the test's eps
// is large enough that such near-zero gradients step in proportion to their size.
optim::AdamWConfig adamw_config() { return {.eps = 1e-4, .weight_decay = 0.01, .max_grad_norm = 1.0}; }

// The single-process step the pipeline must reproduce: the Objective contract
// (train/objective.hpp) over a whole model, then AdamW clipped by the global norm.
struct ReferenceStep {
  double loss = 0, grad_norm = 0;
};
ReferenceStep reference_step(model::Model& m, optim::AdamW& opt, train::Objective& obj,
                             const std::vector<io::SampleBatch>& mbs, double lr) {
  auto acts = m.make_activations({.max_tokens = kMaxTokens, .max_sequences = kMaxSequences, .training = true});
  m.zero_grad();
  ReferenceStep r;
  const double scale = 1.0 / train::total_units(obj, mbs);
  for (const io::SampleBatch& mb : mbs) {
    m.forward({mb.tokens, mb.offsets}, acts);
    r.loss += scale * obj.loss_and_grad(m, acts, mb, scale).loss;
    m.backward(acts);
  }
  r.grad_norm = opt.step(lr, 1.0);
  return r;
}

// Largest |a - b| over the tensors of `part` (a stage), looked up by name in `whole`.
double max_diff(const model::Model& part, const model::Model& whole, bool grads) {
  double worst = 0;
  for (const auto& t : part.tensors()) {
    const auto* w = const_cast<model::Model&>(whole).find(t.name);
    BOOST_REQUIRE_MESSAGE(w != nullptr, t.name);
    const float* a = grads ? t.grad : t.data;
    const float* b = grads ? w->grad : w->data;
    for (std::int64_t i = 0; i < t.numel; ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

std::vector<io::SampleBatch> split(const io::SampleBatch& b, int count) {
  std::vector<std::size_t> order(b.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  return data::split_micro_batches(b, order, count);
}

double max_abs(const model::Model& m, bool grads) {
  double worst = 0;
  for (const auto& t : m.tensors()) {
    const float* a = grads ? t.grad : t.data;
    for (std::int64_t i = 0; i < t.numel; ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i])));
  }
  return worst;
}

std::filesystem::path shared_dir(comm::Communicator& world, const std::string& label, bool tied = false) {
  const auto dir = test::scratch(fmt::format("np{}-{}", world.size(), label));
  if (world.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    model::ModelConfig cfg = tiny_config();
    cfg.tie_word_embeddings = tied;
    test::write_actor_critic(cfg, dir, 42);
  }
  world.barrier();
  return dir;
}

// groups > 1: the schedule is for world / groups devices and runs as that many copies,
// data parallel (sched::tile_schedule), each on its share of the micro-batches.
void check_fused_step(const test::FusedModels& fm, const std::string& order, const std::string& label,
                      bool tied = false, int groups = 1) {
  auto world = comm::mpi_world();
  const auto dir = shared_dir(*world, label, tied);
  auto be = backend::make_cpu_backend(1);
  const auto samples = test::scored_samples(11, 3, 9, 259, 5);
  const auto mbs = split(samples, fm.micro_batches * groups);

  train::PolicyObjective policy(train::ppo_actor_options(0.2, 0.01));
  train::ValueObjective value(0.2);
  train::FusedPipeline pipe(test::fused_schedule(fm, order), *world, *be,
                            {{"actor", dir / "actor.h5", &policy, adamw_config()},
                             {"critic", dir / "critic.h5", &value, adamw_config()}},
                            {.schedule_origin = label, .max_tokens = kMaxTokens, .max_sequences = kMaxSequences});
  BOOST_TEST(pipe.micro_batches(0) == fm.micro_batches * groups);
  BOOST_TEST(pipe.micro_batches(1) == fm.micro_batches * groups);
  const std::vector<std::vector<io::SampleBatch>> batches{mbs, mbs};
  const std::vector<double> lr{kActorLr, kCriticLr};
  const auto res = pipe.step(batches, lr);
  const std::vector<std::filesystem::path> outs{dir / "actor-out.h5", dir / "critic-out.h5"};
  const auto files = pipe.save(outs, "test_pipeline");
  BOOST_TEST(files.size() == static_cast<std::size_t>(fm.actor_stages + fm.critic_stages));

  // The same step in one process, on every rank (cheap for the tiny model).
  train::PolicyObjective ref_policy(train::ppo_actor_options(0.2, 0.01));
  train::ValueObjective ref_value(0.2);
  train::Objective* ref_obj[2] = {&ref_policy, &ref_value};
  const char* names[2] = {"actor", "critic"};
  for (int m = 0; m < 2; ++m) {
    BOOST_TEST_CONTEXT(label << ", " << names[m] << ", rank " << world->rank()) {
      auto opened = checkpoint::open_model(dir / fmt::format("{}.h5", names[m]), *be);
      auto& ref = *opened.model;
      optim::AdamW opt(*be, ref.tensors(), adamw_config());
      const auto init = ref.parameters();
      const std::vector<float> before(init.begin(), init.end());
      const ReferenceStep r = reference_step(ref, opt, *ref_obj[m], mbs, lr[static_cast<std::size_t>(m)]);

      const auto& got = res.models[static_cast<std::size_t>(m)];
      BOOST_TEST(got.stats.loss == r.loss, boost::test_tools::tolerance(1e-5));
      BOOST_TEST(got.grad_norm == r.grad_norm, boost::test_tools::tolerance(1e-5));
      BOOST_TEST(got.grad_norm > 0.0);
      BOOST_TEST(got.tokens == static_cast<std::int64_t>(samples.token_count()));
      // This rank's stage: its gradients (replicas summed) and its updated weights.
      const double grad_scale = max_abs(ref, true);
      BOOST_TEST(max_diff(pipe.stage(m), ref, true) <= 1e-4 * grad_scale);
      BOOST_TEST(max_diff(pipe.stage(m), ref, false) <= 2e-6);

      // The saved stage files read back as one whole model equal the reference.
      if (world->rank() == 0) {
        auto saved = checkpoint::open_model(outs[static_cast<std::size_t>(m)], *be);
        BOOST_TEST(saved.files.size() == static_cast<std::size_t>(m == 0 ? fm.actor_stages : fm.critic_stages));
        BOOST_TEST(saved.step == opened.step + 1);
        BOOST_TEST(max_diff(*saved.model, ref, false) <= 2e-6);
        // ... and the step moved the weights far more than that tolerance.
        double moved = 0;
        const auto after = ref.parameters();
        for (std::size_t i = 0; i < before.size(); ++i) moved = std::max(moved, static_cast<double>(std::fabs(after[i] - before[i])));
        BOOST_TEST(moved > 1e-4);
      }
    }
  }
}

test::FusedModels models_for(int devices, int critic_stages) {
  return {.devices = devices, .actor_stages = devices, .critic_stages = critic_stages, .micro_batches = 4};
}

}  // namespace

BOOST_AUTO_TEST_CASE(fused_step_equals_single_process_greedy) {
  auto world = comm::mpi_world();
  const int n = world->size();
  check_fused_step(models_for(n, n), "greedy", "greedy");
}

BOOST_AUTO_TEST_CASE(fused_step_equals_single_process_1f1b) {
  auto world = comm::mpi_world();
  const int n = world->size();
  check_fused_step(models_for(n, n), "1f1b", "1f1b");
}

BOOST_AUTO_TEST_CASE(critic_replicas_average_their_gradients) {
  auto world = comm::mpi_world();
  const int n = world->size();
  if (n % 2 != 0) return;  // the critic as 2 replicas of n/2 stages
  check_fused_step(models_for(n, n / 2), "greedy", "replicas");
}

BOOST_AUTO_TEST_CASE(copies_of_a_schedule_run_data_parallel) {
  auto world = comm::mpi_world();
  const int n = world->size();
  if (n % 2 != 0) return;  // two copies of a schedule for n/2 devices
  check_fused_step(models_for(n / 2, n / 2), "greedy", "groups", false, 2);
}

BOOST_AUTO_TEST_CASE(tied_embeddings_sum_the_first_and_last_stage_gradients) {
  auto world = comm::mpi_world();
  const int n = world->size();
  check_fused_step(models_for(n, n), "greedy", "tied", true);
}

BOOST_AUTO_TEST_CASE(refuses_a_schedule_for_another_device_count) {
  auto world = comm::mpi_world();
  const int n = world->size();
  auto be = backend::make_cpu_backend(1);
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value;
  const auto schedule = test::fused_schedule(models_for(n + 1, n + 1));
  try {
    train::FusedPipeline pipe(schedule, *world, *be,
                              {{"actor", "actor.h5", &policy, {}}, {"critic", "critic.h5", &value, {}}},
                              {.schedule_origin = "sched.json"});
    BOOST_FAIL("a schedule for another device count was accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(e.file() == "sched.json");
    BOOST_TEST(e.field() == "spec.devices");
    BOOST_TEST(what.find(fmt::format("{} devices but {} MPI ranks", n + 1, n)) != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(refuses_micro_batches_that_do_not_fit_the_schedule) {
  auto world = comm::mpi_world();
  const auto dir = shared_dir(*world, "refuse");
  auto be = backend::make_cpu_backend(1);
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value;
  const int n = world->size();
  train::FusedPipeline pipe(test::fused_schedule(models_for(n, n)), *world, *be,
                            {{"critic", dir / "critic.h5", &value, {}}, {"actor", dir / "actor.h5", &policy, {}}},
                            {.schedule_origin = "sched.json", .max_tokens = kMaxTokens, .max_sequences = kMaxSequences});
  const auto samples = test::scored_samples(6, 3, 5, 259, 1);
  const std::vector<std::vector<io::SampleBatch>> batches{split(samples, 4),
                                                          split(samples, 3)};
  const std::vector<double> lr{1e-3, 1e-3};
  try {
    pipe.step(batches, lr);
    BOOST_FAIL("3 actor micro-batches were accepted for a schedule of 4");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(e.file() == "sched.json");
    BOOST_TEST(what.find("spec.models[0].micro_batches: the schedule runs 4 (1 replica(s) x 4) micro-batches of actor; "
                         "the data has 3") != std::string::npos,
               what);
  }

  // Models are matched by name, and a schedule model left out is refused.
  try {
    train::FusedPipeline only_actor(test::fused_schedule(models_for(n, n)), *world, *be,
                                    {{"actor", dir / "actor.h5", &policy, {}}}, {.schedule_origin = "sched.json"});
    BOOST_FAIL("a scheduled critic without a model was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("\"critic\" is scheduled but not trained here") != std::string::npos, e.what());
  }
}

namespace {

// The fused schedule of this many devices with one defect that braid-schedgen --verify
// refuses, made in its JSON form as a hand edit would make it (the cut stream: in memory).
sched::LoadedSchedule defective_schedule(int devices, const std::string& defect) {
  json doc = json::parse(test::fused_schedule_json(models_for(devices, devices)));
  json& ins = doc["devices"][0]["instructions"];
  std::size_t send = 0;
  while (send < ins.size() && ins[send]["op"] != "SEND_F") ++send;
  BOOST_REQUIRE(send < ins.size());
  if (defect == "send before its F") {
    std::size_t f = 0;
    auto same = [&](const json& a, const json& b) {
      return a["model"] == b["model"] && a["replica"] == b["replica"] && a["stage"] == b["stage"] &&
             a["micro_batch"] == b["micro_batch"];
    };
    while (f < send && !(ins[f]["op"] == "F" && same(ins[f], ins[send]))) ++f;
    BOOST_REQUIRE(f < send);
    json moved = ins[send];
    ins.erase(send);
    ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(f), moved);
  } else if (defect == "deleted send") {
    ins.erase(send);
  } else if (defect == "send to itself") {
    ins[send]["peer"] = 0;
  }
  sched::LoadedSchedule loaded = sched::load_schedule(doc, "bad-sched.json");
  if (defect == "stream cut in half") {
    // The file's reader refuses a stream computing fewer subtasks than its device runs; the
    // pipeline's dry run stands behind it for a schedule made in memory.
    auto& other = loaded.lowered.streams[1];
    other.erase(other.begin() + static_cast<std::ptrdiff_t>(other.size() / 2), other.end());
  }
  return loaded;
}

}  // namespace

// Streams braid-schedgen --verify refuses are refused on every rank before any message
// moves (they crashed or hung the job): exit 2 from the tools, the file and the device named.
BOOST_AUTO_TEST_CASE(refuses_instruction_streams_that_do_not_run) {
  auto world = comm::mpi_world();
  const int n = world->size();
  if (n < 2) return;  // one device sends nothing
  auto be = backend::make_cpu_backend(1);
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"send before its F", "device 0 instruction 0 (SEND_F of actor replica 0 stage 0 micro-batch 0, peer 1 buffer 0): "
                            "sends the output of subtask 0 before computing it"},
      // Device 1 meets micro-batch 1's tensor where it expects micro-batch 0's.
      {"deleted send", "(RECV_F of actor replica 0 stage 1 micro-batch 0, peer 0 buffer 0): buffer 0 holds"},
      {"send to itself", "device 0 instruction 1 (SEND_F of actor replica 0 stage 0 micro-batch 0, peer 0 buffer 0): "
                         "sends subtask 0's output to device 0, which does not consume it"},
      {"stream cut in half", "the instruction streams do not run: "}};
  for (const auto& [defect, message] : cases) {
    BOOST_TEST_CONTEXT(defect << ", rank " << world->rank()) {
      const auto schedule = defective_schedule(n, defect);
      try {
        train::FusedPipeline pipe(schedule, *world, *be,
                                  {{"actor", "actor.h5", &policy, {}}, {"critic", "critic.h5", &value, {}}},
                                  {.schedule_origin = "bad-sched.json"});
        BOOST_FAIL("a schedule whose streams do not run was accepted");
      } catch (const InputError& e) {
        const std::string what = e.what();
        BOOST_TEST(e.file() == "bad-sched.json");
        BOOST_TEST(what.find("the instruction streams do not run") != std::string::npos, what);
        BOOST_TEST(what.find(message) != std::string::npos, what);
      }
    }
  }
}

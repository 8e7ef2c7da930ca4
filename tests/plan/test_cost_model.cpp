// Generation's prefill is costed from the KV-cache path's table, the other
// forward passes from the packed forward's; generation alone pays for sampling.
// LoRA and activation recomputation in the memory and time of training, and the
// plan that picks recomputation where memory is short.
#define BOOST_TEST_MODULE plan_cost_model
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "model/model.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/cost_model.hpp"
#include "plan/search.hpp"

using namespace braid::plan;
using braid::json;

namespace {

std::string fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/plan/" + name; }

struct Setup {
  Experiment exp = load_experiment(fixture("ppo-tiny.json"));
  Cluster cluster = load_cluster(fixture("cluster-1x2.json"));
  Profile profile;
  Setup() {
    std::vector<ModelShape> shapes;
    for (const auto& m : exp.models) shapes.push_back(m.shape);
    profile = analytic_profile(hardware_preset("h100"), shapes);
  }
  ModelProfile& actor() {
    for (auto& m : profile.models) {
      if (m.shape.same_as(exp.models[0].shape)) return m;
    }
    throw std::logic_error("no actor entry");
  }
};

const Call kGen{"actor_gen", "actor", CallKind::generate};
const Call kRef{"ref_inf", "ref", CallKind::inference};
const Mesh kMesh{0, 2};
const Strategy kStrategy{.dp = 2, .tp = 1, .pp = 1, .micro = 1};

}  // namespace

BOOST_AUTO_TEST_CASE(a_slower_prefill_table_lengthens_generation_only) {
  Setup base, slow;
  for (double& v : slow.actor().layer_prefill.v) v *= 2;
  const CostModel a(base.exp, base.profile, base.cluster), b(slow.exp, slow.profile, slow.cluster);
  const GenTimeline ga = a.gen_timeline(kMesh, kStrategy), gb = b.gen_timeline(kMesh, kStrategy);
  // One micro-batch of 32 prompts x 128 tokens per replica through every layer: the
  // difference is one more layer_fwd per layer at that point, nothing else.
  const ModelProfile& m = base.actor();
  const double extra = static_cast<double>(m.shape.layers) * m.layer_fwd.at(32 * 128, 128);
  BOOST_TEST(gb.prefill - ga.prefill == extra, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(gb.end - gb.prefill == ga.end - ga.prefill, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(b.estimate(kGen, kMesh, kStrategy).time > a.estimate(kGen, kMesh, kStrategy).time);
  // The reference model shares the actor's entry; its inference reads layer_fwd.
  BOOST_TEST(b.estimate(kRef, kMesh, kStrategy).time == a.estimate(kRef, kMesh, kStrategy).time);
}

BOOST_AUTO_TEST_CASE(a_profile_without_the_prefill_table_prefills_at_layer_fwd) {
  Setup with, without;
  without.actor().layer_prefill = {};
  const CostModel a(with.exp, with.profile, with.cluster), b(without.exp, without.profile, without.cluster);
  BOOST_TEST(b.gen_timeline(kMesh, kStrategy).prefill == a.gen_timeline(kMesh, kStrategy).prefill);
  BOOST_TEST(b.gen_timeline(kMesh, kStrategy).prefill > 0);
}

// Sampling is paid once after the prefill (each prompt's first token) and once per
// decode step, at the number of rows still generating; a profile without the table
// (older files) samples for free.
BOOST_AUTO_TEST_CASE(the_sampling_table_adds_one_draw_per_step) {
  Setup with, without;
  without.actor().sample = {};
  ModelProfile& m = with.actor();
  m.sample.x = {1, 1024};
  m.sample.v = {1e-3, 1e-3};  // a flat millisecond per step, whatever the rows
  const CostModel a(with.exp, with.profile, with.cluster), b(without.exp, without.profile, without.cluster);
  const GenTimeline ga = a.gen_timeline(kMesh, kStrategy), gb = b.gen_timeline(kMesh, kStrategy);
  BOOST_TEST(ga.prefill - gb.prefill == 1e-3, boost::test_tools::tolerance(1e-9));
  double steps = 0;
  for (const auto& blk : ga.blocks) steps += blk.remaining > 0 ? blk.steps : 0;
  BOOST_TEST(steps > 0);
  BOOST_TEST((ga.end - ga.prefill) - (gb.end - gb.prefill) == steps * 1e-3, boost::test_tools::tolerance(1e-6));
  // Inference samples nothing.
  BOOST_TEST(a.estimate(kRef, kMesh, kStrategy).time == b.estimate(kRef, kMesh, kStrategy).time);
}

namespace {

// GRPO of a 7B Llama (Llama 2 7B's sizes: hidden 4096, 32 layers, intermediate 11008, vocabulary
// 32000) on one 80 GB H100 (the analytic profile), 16 samples of `prompt` + `response` tokens in
// micro-batches of 8, with the experiment's train settings.
Experiment seven_b(const json& train, int prompt, int response) {
  const json llama = {{"hidden_size", 4096}, {"intermediate_size", 11008}, {"num_hidden_layers", 32},
                      {"num_attention_heads", 32}, {"num_key_value_heads", 32}, {"vocab_size", 32000}};
  const json small = {{"hidden_size", 512}, {"intermediate_size", 1024}, {"num_hidden_layers", 4},
                      {"num_attention_heads", 8}, {"num_key_value_heads", 8}, {"vocab_size", 32000}};
  json doc = {{"format", "braid.experiment"}, {"version", 1}, {"algorithm", "grpo"},
              {"models", {{"actor", {{"config", llama}}}, {"ref", {{"config", llama}}}, {"reward", {{"config", small}}}}},
              {"batch", {{"global", 16}, {"mini", 16}, {"micro", 8}}},
              {"prompt_len", {{"dist", "fixed"}, {"value", prompt}}},
              {"response_len", {{"dist", "fixed"}, {"value", response}}}};
  if (!train.is_null()) doc["train"] = train;
  return experiment_from_json(doc, "seven-b");
}

struct Planned {
  Evaluation eval;
  Strategy actor_train;
  CallEstimate estimate;
};

Planned plan_one_device(const Experiment& e) {
  std::vector<ModelShape> shapes;
  for (const auto& m : e.models) shapes.push_back(m.shape);
  const Profile prof = analytic_profile(hardware_preset("h100"), shapes);
  const Cluster cl = cluster_from_json(json{{"format", "braid.cluster"}, {"version", 1}, {"nodes", 1},
                                            {"devices_per_node", 1}, {"device_memory_gb", 80}},
                                       "one-h100");
  CostModel cm(e, prof, cl);
  const PlanSpace space(cm, {false, false, std::nullopt});
  const SearchResult r = exhaustive_search(space, false);
  for (std::size_t c = 0; c < space.calls().size(); ++c) {
    if (space.calls()[c].name != "actor_train") continue;
    const Entry& entry = space.entries(static_cast<int>(c), r.plan[c].mesh)[static_cast<std::size_t>(r.plan[c].entry)];
    return {r.eval, entry.strategy, entry.estimate};
  }
  throw std::logic_error("no actor_train");
}

}  // namespace

// The planner's adapter count is the engine's (model::adapter_count, what braid-train allocates),
// for plain and grouped-query attention and another head_dim.
BOOST_AUTO_TEST_CASE(lora_adapters_are_counted_as_the_engine_lays_them_out) {
  for (const json& cfg : {json{{"hidden_size", 64}, {"intermediate_size", 96}, {"num_hidden_layers", 3},
                               {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"vocab_size", 100}},
                          json{{"hidden_size", 64}, {"intermediate_size", 80}, {"num_hidden_layers", 2},
                               {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"head_dim", 16},
                               {"vocab_size", 100}}}) {
    braid::Checker c("config");
    const ModelShape s = shape_from_hf_config(cfg, c, "config");
    c.check();
    for (int rank : {1, 8}) {
      braid::model::ModelOptions opt;
      opt.lora.rank = rank;
      BOOST_TEST(s.layers * s.layer_lora_params(rank) == double(braid::model::adapter_count(s.config, opt)));
    }
  }
}

// A 7B GRPO on one 80 GB device: every weight trained does not fit (bf16 weights, f32 gradients
// and Adam's 12 bytes a parameter); LoRA does, at sequences of 512 + 512, where the plan keeps the
// activations (recomputing would only cost time); at 1024 + 1024 the activations of a
// micro-batch of 8 do not fit beside the weights and "auto" recomputes every layer, which fits.
BOOST_AUTO_TEST_CASE(lora_and_recomputation_fit_a_7b_where_full_training_does_not) {
  const Planned full = plan_one_device(seven_b(nullptr, 512, 512));
  BOOST_TEST(full.eval.oom);
  const Planned lora = plan_one_device(seven_b({{"lora_rank", 16}}, 512, 512));
  BOOST_TEST(!lora.eval.oom);
  BOOST_TEST(lora.actor_train.recompute == 0);
  const Planned lora_auto = plan_one_device(seven_b({{"lora_rank", 16}, {"recompute", "auto"}}, 512, 512));
  BOOST_TEST(lora_auto.actor_train.recompute == 0);
  BOOST_TEST(lora_auto.eval.time == lora.eval.time, boost::test_tools::tolerance(1e-12));

  // What LoRA keeps per device beside the weights: 16 bytes per adapter parameter (f32 values,
  // gradients, two moments; 16 · 32 layers · 78080 = 40.0 M parameters of rank 16) and an f32
  // gradient scratch of the largest matrix (the 32000 x 4096 embedding); full training 16 bytes
  // per parameter (f32 gradient, Adam's moments and master copy).
  const double adapters = 32.0 * 16 * (7 * 4096 + 2 * 4096 + 2 * 4096 + 3 * 11008);
  BOOST_TEST(lora.estimate.static_bytes - lora.estimate.layout_weights == 16 * adapters + 4.0 * 32000 * 4096,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(full.estimate.static_bytes - full.estimate.layout_weights ==
                 16.0 * seven_b(nullptr, 512, 512).models[0].shape.total_params(),
             boost::test_tools::tolerance(1e-9));

  const Planned kept = plan_one_device(seven_b({{"lora_rank", 16}}, 1024, 1024));
  BOOST_TEST(kept.eval.oom);
  const Planned recomputed = plan_one_device(seven_b({{"lora_rank", 16}, {"recompute", "auto"}}, 1024, 1024));
  BOOST_TEST(!recomputed.eval.oom);
  BOOST_TEST(recomputed.actor_train.recompute == 1);
  // Recomputing every layer keeps one layer's activations and every layer's input (hidden bf16
  // values a token) instead of 32 layers' (the profile's 17 · hidden bf16 values a token and
  // layer, and LoRA's 7 · rank f32 of x·Aᵀ), for 8 · 2048 tokens; and costs a forward of the
  // layers more.
  const double tokens = 8 * 2048, slot = 17 * 2 * 4096 + 7 * 16 * 4;
  BOOST_TEST(kept.estimate.active_bytes - recomputed.estimate.active_bytes == tokens * (31 * slot - 32 * 2 * 4096),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(recomputed.estimate.time > kept.estimate.time);
}

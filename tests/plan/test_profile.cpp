// The analytic profile, its tables and its file format.
#define BOOST_TEST_MODULE plan_profile
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/hardware.hpp"
#include "tests/plan/shapes.hpp"

using namespace braid::plan;

namespace {

ModelShape llama7b() { return braid::test::llama_shape("llama-7b", 4096, 11008, 32, 32, 32000); }

}  // namespace

BOOST_AUTO_TEST_CASE(table_interpolates_clamps_below_and_extrapolates_above) {
  Table1 t{{1, 2, 4}, {10, 20, 40}};
  BOOST_TEST(t.at(3) == 30.0);
  BOOST_TEST(t.at(0.5) == 10.0);
  BOOST_TEST(t.at(8) == 80.0);
  Table2 u{{1, 2}, {10, 20}, {1, 2, 3, 4}};
  BOOST_TEST(u.at(1.5, 15) == 2.5);
  BOOST_TEST(u.at(2, 10) == 3.0);
}

BOOST_AUTO_TEST_CASE(llama7b_parameter_count_matches_the_published_size) {
  // LLaMA-7B has 6.74e9 parameters; ours adds only the value-less norms' rounding.
  BOOST_TEST(std::abs(llama7b().total_params() - 6.738e9) / 6.738e9 < 0.002);
}

// Other families (docs/models.md): their published parameter counts, a sliding window's
// cheaper long-sequence attention, and shapes that round-trip through profile.json.
BOOST_AUTO_TEST_CASE(family_shapes_count_their_pieces) {
  braid::Checker c("configs");
  // Qwen2.5-0.5B: q/k/v biases, tied embeddings: 494,032,768 parameters.
  const ModelShape qwen = shape_from_hf_config(braid::json::parse(R"({"model_type": "qwen2", "hidden_size": 896,
      "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
      "vocab_size": 151936, "tie_word_embeddings": true})"), c, "qwen");
  // gemma-2-2b: head_dim 256, four norms a layer, tied: 2,614,341,888; windows on even layers.
  const ModelShape gemma = shape_from_hf_config(braid::json::parse(R"({"model_type": "gemma2", "hidden_size": 2304,
      "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
      "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096})"), c, "gemma");
  c.check();
  BOOST_TEST(qwen.total_params() == 494032768.0);
  BOOST_TEST(gemma.total_params() == 2614341888.0);
  BOOST_TEST(gemma.kv_dim() == 4 * 256);
  // At 16k tokens half the layers attend over 4096 keys instead of 8192 on average.
  BOOST_TEST(gemma.attended_keys(16384) == (13 * 8192.0 + 13 * 4096.0) / 26);
  BOOST_TEST(gemma.attended_keys(1024) == 512.0);
  ModelShape no_window = gemma;
  no_window.config.sliding_window = 0;
  const Hardware hw = hardware_preset("h100");
  BOOST_TEST(analytic_model_profile(gemma, hw).layer_fwd.at(65536, 16384) <
             analytic_model_profile(no_window, hw).layer_fwd.at(65536, 16384));
  BOOST_TEST(!gemma.same_as(no_window));
  BOOST_TEST(gemma.key() != no_window.key());
  // Written to profile.json and read back: the same shape.
  for (const ModelShape& s : {qwen, gemma}) {
    braid::Checker back("profile.json");
    const ModelShape r = shape_from_hf_config(braid::json::parse(shape_to_hf_json(s).dump()), back, "");
    back.check();
    BOOST_TEST(r.same_as(s));
    BOOST_TEST(r.total_params() == s.total_params());
  }
}

BOOST_AUTO_TEST_CASE(decode_is_flat_until_bs_max_then_grows) {
  const Hardware hw = hardware_preset("h100");
  const ModelProfile m = analytic_model_profile(llama7b(), hw);
  // Weight reads dominate a small-batch step: roughly hw peak / bandwidth
  // tokens per weight byte before compute or KV reads take over.
  BOOST_TEST(m.bs_max >= 8.0);
  BOOST_TEST(m.bs_max <= 512.0);
  const double t1 = m.layer_decode.at(1, 128), tmax = m.layer_decode.at(m.bs_max, 128);
  BOOST_TEST(tmax <= 1.25 * t1);
  BOOST_TEST(m.layer_decode.at(4 * m.bs_max, 128) > 1.5 * t1);
  // Long KV makes a step slower at the same batch.
  BOOST_TEST(m.layer_decode.at(64, 8192) > m.layer_decode.at(64, 128));
}

BOOST_AUTO_TEST_CASE(large_forward_runs_at_matmul_efficiency_and_backward_costs_twice) {
  const Hardware hw = hardware_preset("h100");
  const ModelShape s = llama7b();
  const ModelProfile m = analytic_model_profile(s, hw);
  const double tokens = 65536, seq = 1024;
  const double flops = 2 * tokens * s.layer_matmul_params() + 2 * tokens * seq * s.hidden;
  const double ideal = flops / (hw.peak_flops * hw.eff.matmul) + hw.layer_overhead;
  BOOST_TEST(std::abs(m.layer_fwd.at(tokens, seq) - ideal) / ideal < 1e-9);
  BOOST_TEST(std::abs(m.layer_bwd.at(tokens, seq) / m.layer_fwd.at(tokens, seq) - 2.0) < 0.01);
}

BOOST_AUTO_TEST_CASE(memory_per_layer_follows_mixed_precision_adam) {
  const ModelShape s = llama7b();
  const LayerMemory mem = analytic_memory(s, 2);
  BOOST_TEST(mem.weights == 2 * s.layer_params());
  BOOST_TEST(mem.gradients == 4 * s.layer_params());
  BOOST_TEST(mem.optimizer == 12 * s.layer_params());
  BOOST_TEST(mem.kv_per_token == 2.0 * 4096 * 2);
}

BOOST_AUTO_TEST_CASE(profile_round_trips_through_json) {
  const Profile p = analytic_profile(hardware_preset("h200"), {llama7b()});
  const auto text = profile_to_json(p).dump();
  const Profile q = profile_from_json(braid::json::parse(text), "p.json");
  BOOST_TEST(q.hardware.mem_capacity == p.hardware.mem_capacity);
  BOOST_REQUIRE(q.models.size() == 1);
  BOOST_TEST(q.models[0].shape.same_as(p.models[0].shape));
  BOOST_TEST(q.models[0].layer_decode.at(100, 3000) == p.models[0].layer_decode.at(100, 3000));
  BOOST_TEST(q.comm.p2p_inter.bandwidth == p.comm.p2p_inter.bandwidth);
}

BOOST_AUTO_TEST_CASE(the_prefill_table_round_trips_and_is_optional) {
  Profile p = analytic_profile(hardware_preset("h100"), {llama7b()});
  ModelProfile& m = p.models[0];
  BOOST_TEST(m.layer_prefill.v == m.layer_fwd.v);  // the roofline cannot tell the paths apart
  for (double& v : m.layer_prefill.v) v *= 1.3;
  auto doc = braid::json::parse(profile_to_json(p).dump());
  const Profile with = profile_from_json(doc, "p.json");
  BOOST_TEST(with.models[0].layer_prefill.v == m.layer_prefill.v);
  BOOST_TEST(with.models[0].prefill_table().at(300, 200) == m.layer_prefill.at(300, 200));
  // A profile from before the table: generation's prefill falls back to layer_fwd.
  doc["models"][0].erase("layer_prefill");
  const Profile without = profile_from_json(doc, "old.json");
  BOOST_TEST(without.models[0].layer_prefill.v.empty());
  BOOST_TEST(without.models[0].prefill_table().v == m.layer_fwd.v);
  BOOST_TEST(!profile_to_json(without)["models"][0].contains("layer_prefill"));
  // Present but malformed is still an error.
  doc["models"][0]["layer_prefill"] = {{"tokens", {1, 2}}};
  BOOST_CHECK_THROW(profile_from_json(doc, "bad.json"), braid::InputError);
}

BOOST_AUTO_TEST_CASE(a_broken_profile_reports_every_problem) {
  auto doc = braid::json::parse(profile_to_json(analytic_profile(hardware_preset("h100"), {llama7b()})).dump());
  doc["version"] = 9;
  doc["models"][0]["layer_fwd"]["tokens"][1] = 0.5;  // no longer increasing
  doc["models"][0]["bs_maxx"] = 3;
  try {
    profile_from_json(doc, "bad.json");
    BOOST_FAIL("accepted a broken profile");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.problems().size() == 3u);
    const std::string all = e.what();
    BOOST_TEST(all.find("bad.json") != std::string::npos);
    BOOST_TEST(all.find("models[0].layer_fwd.tokens") != std::string::npos);
    BOOST_TEST(all.find("did you mean \"bs_max\"") != std::string::npos);
  }
}

// Rates and sizes past any device (1e300 GB/s was planned with), a hardware block missing a key
// braid-profile writes (the efficiency defaulted to 1), a spread that is not one, and bs_max
// past any batch are refused naming the field.
BOOST_AUTO_TEST_CASE(absurd_rates_and_a_hardware_block_missing_a_key_are_refused) {
  const auto good = braid::json::parse(profile_to_json(analytic_profile(hardware_preset("h100"), {llama7b()})).dump());
  const std::vector<std::pair<std::string, braid::json>> cases = {
      {"/hardware/peak_tflops", 1e300}, {"/hardware/mem_bandwidth_gbs", 1e300}, {"/hardware/mem_capacity_gb", 1e7},
      {"/hardware/inter_node_gbs", 9223372036854775808.0}, {"/hardware/intra_node_latency_us", 1e300},
      {"/hardware/layer_overhead_us", 2e6}, {"/comm/p2p_intra/gbs", 1e300}, {"/comm/allreduce_inter/latency_us", 1e300},
      {"/models/0/bs_max", 1e300}, {"/models/0/spread", "x"}, {"/models/0/spread", {{"layer_fwd", -1}}}};
  for (const auto& [pointer, value] : cases) {
    auto doc = good;
    doc[braid::json::json_pointer(pointer)] = value;
    std::string field = pointer.substr(1);
    for (auto at = field.find("/0/"); at != std::string::npos; at = field.find("/0/")) field.replace(at, 3, "[0].");
    std::replace(field.begin(), field.end(), '/', '.');
    BOOST_TEST_CONTEXT(pointer) {
      try {
        profile_from_json(doc, "bad.json");
        BOOST_TEST(false, "accepted");
      } catch (const braid::InputError& e) {
        BOOST_TEST(std::string(e.what()).find(field) != std::string::npos, e.what());
      }
    }
  }
  for (const char* key : {"name", "devices_per_node", "intra_node_latency_us", "dtype_bytes", "efficiency"}) {
    auto doc = good;
    doc["hardware"].erase(key);
    BOOST_TEST_CONTEXT(key) {
      try {
        profile_from_json(doc, "bad.json");
        BOOST_TEST(false, "accepted");
      } catch (const braid::InputError& e) {
        BOOST_TEST(std::string(e.what()).find(std::string("hardware.") + key + ": missing") != std::string::npos, e.what());
      }
    }
  }
  // A hardware file (not a profile's block) takes the documented defaults.
  auto hw = good["hardware"];
  hw.erase("efficiency");
  hw.erase("intra_node_latency_us");
  braid::Checker c("hw.json");
  const Hardware h = hardware_from_json(hw, c, "");
  BOOST_TEST(c.ok());
  BOOST_TEST(h.intra_latency == 5 * 1e-6);
}

BOOST_AUTO_TEST_CASE(calibration_recovers_the_efficiency_of_a_profile_made_with_it) {
  Hardware truth = hardware_preset("h100");
  truth.eff = {0.41, 0.83, 0.7};
  const Profile measured = analytic_profile(truth, {llama7b()});
  Hardware guess = hardware_preset("h100");
  const Efficiency e = calibrate_efficiency(guess, measured);
  BOOST_TEST(std::abs(e.matmul - 0.41) < 0.01);
  BOOST_TEST(std::abs(e.memory - 0.83) < 0.03);
}

// The summaries behind `braid inspect --json` and the verdicts of `braid check`,
// on the fixtures whose contents make_fixtures.py fixes.
#define BOOST_TEST_MODULE inspect
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <limits>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/json.hpp"
#include "io/deferred_file.hpp"
#include "io/inspect.hpp"
#include "io/sample_shard.hpp"
#include "io/token_display.hpp"
#include "tests/common/scratch.hpp"

using namespace braid;
using namespace braid::io;
using braid::test::fixture;

BOOST_AUTO_TEST_CASE(sample_shard_summary) {
  const auto s = inspect_file(fixture("io/good_samples.h5").string(), {.samples_shown = 5});
  BOOST_TEST(s["kind"] == "samples");
  BOOST_TEST(s["sequences"] == 3);
  BOOST_TEST(s["tokens"] == 14);
  BOOST_TEST(s["policy_step"] == 3);
  BOOST_TEST(s["config"]["fixture"] == true);
  BOOST_TEST(s["prompt_length"]["min"] == 2.0);
  BOOST_TEST(s["response_length"]["max"] == 3.0);
  BOOST_TEST(s["response_length"]["p50"] == 3.0);
  BOOST_TEST(s["reward"]["mean"].get<double>() == 0.25, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(s["token_arrays"].contains("values"));
  BOOST_TEST(!s["token_arrays"].contains("advantages"));
  // logprobs/actor over response tokens only: the fixture's linspace at positions 3-5 and 11-13.
  BOOST_TEST(s["token_arrays"]["logprobs/actor"]["count"] == 6);
  BOOST_TEST(s["first_samples"].size() == 3u);
  BOOST_TEST(s["first_samples"][0]["prompt"] == "Hi!");
  BOOST_TEST(s["first_samples"][2]["response"] == "\\x07A<|eos|>");
  BOOST_TEST(s["first_samples"][1]["response_len"] == 0);
  const std::string text = render_inspect_text(s);
  BOOST_TEST(text.find("3 sequences, 14 tokens") != std::string::npos);
  BOOST_TEST(text.find("response: \"\\x07A<|eos|>\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(weight_shard_summary) {
  const auto s = inspect_file(fixture("io/good_weights.h5").string());
  BOOST_TEST(s["kind"] == "weights");
  BOOST_TEST(s["tensor_count"] == 10);   // the embedding and layer 0's nine tensors
  BOOST_TEST(s["parameters"] == 8 * 4 + 2 * 4 + 2 * (4 * 4) + 2 * (2 * 4) + 3 * (8 * 4));
  BOOST_TEST(s["model_config"]["vocab_size"] == 8);
  BOOST_TEST(s["tensors"][0]["name"] == "model.embed_tokens.weight");
  BOOST_TEST(s["tensors"][0]["dtype"] == "float32");
  const std::string text = render_inspect_text(s);
  BOOST_TEST(text.find("model.layers.*.self_attn.q_proj.weight") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(json_file_summary_finds_key_figures) {
  const auto s = inspect_file(fixture("io/schedule.json").string());
  BOOST_TEST(s["format"] == "braid.schedule");
  BOOST_TEST(s["figures"]["makespan"] == 41.5);
  BOOST_TEST(s["figures"]["lower_bound"] == 38.0);
  BOOST_TEST(s["figures"]["baselines.serial_1f1b_makespan"] == 52.0);
  BOOST_TEST(s["keys"]["streams"] == "array of 2");
  BOOST_TEST(s["keys"]["devices"] == 2);
  // A schedule records what made it; this one, from before records, says it records nothing.
  BOOST_TEST(s["made_from"].is_null());
  BOOST_TEST(render_inspect_text(s).find("made from: not recorded") != std::string::npos);
  json plan = {{"format", "braid.plan"}, {"version", 1},
               {"made_from", {{"tool", "braid-meshplan"}, {"output", ""}, {"options", {{"--seed", "2"}}},
                              {"inputs", {{"hardware", "h100"}}}, {"fingerprint", "xxh3-64:0123456789abcdef"}}}};
  const auto file = test::scratch("recorded_plan.json");
  std::ofstream(file) << plan.dump();
  const std::string text = render_inspect_text(inspect_file(file.string()));
  BOOST_TEST(text.find("made from: braid-meshplan (fingerprint xxh3-64:0123456789abcdef)") != std::string::npos, text);
  BOOST_TEST(text.find("options: --seed 2") != std::string::npos, text);
  BOOST_TEST(text.find("input hardware: h100") != std::string::npos, text);
  BOOST_TEST(text.find("made_from:") == std::string::npos, text);   // not listed again among the keys
}

BOOST_AUTO_TEST_CASE(check_file_accepts_good_and_explains_bad) {
  for (const char* good : {"io/good_samples.h5", "io/good_weights.h5", "io/schedule.json"}) {
    BOOST_TEST_INFO(good);
    BOOST_TEST(!check_file(fixture(good).string()).has_value());
  }
  const auto why = check_file(fixture("io/bad_json_not_braid.json").string());
  BOOST_REQUIRE(why.has_value());
  BOOST_TEST(why->find("format: missing (required)") != std::string::npos);
  const auto syntax = check_file(fixture("io/bad_json_syntax.json").string());
  BOOST_REQUIRE(syntax.has_value());
  BOOST_TEST(syntax->find("not valid JSON") != std::string::npos);
  BOOST_CHECK_THROW(inspect_file(fixture("io/bad_truncated.h5").string()), InputError);
}

// A JSON file with a format braid does not write, or a version newer than braid reads,
// is refused naming the field (both were accepted as long as the format began "braid.").
BOOST_AUTO_TEST_CASE(json_files_of_unknown_formats_or_newer_versions_are_refused) {
  auto write = [](const std::string& name, const std::string& text) {
    const auto p = test::scratch(name);
    std::ofstream(p) << text;
    return p.string();
  };
  const auto version2 = write("inspect_v2.json", R"({"format": "braid.schedule", "version": 2, "makespan": 1})");
  const auto why = check_file(version2);
  BOOST_REQUIRE(why.has_value());
  BOOST_TEST(why->find("version: is 2, this braid reads braid.schedule up to version 1") != std::string::npos, *why);
  BOOST_CHECK_THROW(inspect_file(version2), InputError);

  const auto wrong = write("inspect_wrong.json", R"({"format": "braid.schedul", "version": 1})");
  const auto why_format = check_file(wrong);
  BOOST_REQUIRE(why_format.has_value());
  BOOST_TEST(why_format->find("format: is \"braid.schedul\", not a braid JSON format") != std::string::npos,
             *why_format);
  BOOST_TEST(!check_file(write("inspect_run.json", R"({"format": "braid.run", "version": 1})")).has_value());
}

BOOST_AUTO_TEST_CASE(tokens_display_escaped) {
  const std::vector<std::int32_t> ids{'a', '\n', '\\', 0x07, 0xff, 256, 257, 258, 1000, -1};
  BOOST_TEST(display_tokens(ids) == "a\\n\\\\\\x07\\xff<|bos|><|eos|><|pad|><|id:1000|><|id:-1|>");
}

BOOST_AUTO_TEST_CASE(text_display_keeps_utf8_and_escapes_the_rest) {
  BOOST_TEST(display_text("caf\xC3\xA9\n\t\\\x07\xFF\xC3") == "caf\xC3\xA9\\n\\t\\\\\\x07\\xff\\xc3");
}

// A shard decoded with the tokenizer given or recorded in its meta.config (llama2_style:
// <s> 1, </s> 2, ▁hello 271, ▁world 276), else as bytes.
BOOST_AUTO_TEST_CASE(sample_shards_decode_with_their_tokenizer) {
  const std::string tokenizer = fixture("tokenizer/llama2_style").string();
  SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 271, 276, 2}, 2, 0);
  b.add(std::vector<std::int32_t>{1, 271, 3 + 0xC3, 3 + 0xA9, 400}, 2, 1);  // é by byte fallback; 400 past the tokenizer
  const auto recorded = braid::test::scratch("inspect_recorded.h5");
  write_sample_shard(recorded, b, {.config = json{{"tokenizer", tokenizer}}.dump()});
  auto s = inspect_file(recorded.string());
  BOOST_TEST(s["first_samples"][0]["prompt"] == "<s> hello");
  BOOST_TEST(s["first_samples"][0]["response"] == " world</s>");
  BOOST_TEST(s["first_samples"][1]["response"] == "\xC3\xA9<|id:400|>");
  BOOST_TEST(s["decoded_with"].get<std::string>().find("recorded in meta.config") != std::string::npos);
  BOOST_TEST(render_inspect_text(s).find("response: \" world</s>\"") != std::string::npos);

  // No tokenizer recorded: bytes, unless one is given.
  const auto bare = braid::test::scratch("inspect_bare.h5");
  write_sample_shard(bare, b, {});
  s = inspect_file(bare.string());
  BOOST_TEST(s["first_samples"][0]["response"] == "<|id:276|>\\x02");
  BOOST_TEST(s["decoded_with"].get<std::string>().find("records no tokenizer") != std::string::npos);
  s = inspect_file(bare.string(), {.tokenizer = tokenizer});
  BOOST_TEST(s["first_samples"][0]["response"] == " world</s>");
  BOOST_TEST(s["decoded_with"].get<std::string>().find("--tokenizer") != std::string::npos);
  // A recorded tokenizer that is gone: bytes, saying so; a given one that is bad: an error naming it.
  const auto gone = braid::test::scratch("inspect_gone.h5");
  write_sample_shard(gone, b, {.config = json{{"tokenizer", "no/such/tokenizer.json"}}.dump()});
  s = inspect_file(gone.string());
  BOOST_TEST(s["decoded_with"].get<std::string>().find("no/such/tokenizer.json is not there") != std::string::npos);
  BOOST_CHECK_THROW(inspect_file(bare.string(), {.tokenizer = fixture("io/schedule.json").string()}), InputError);
}

// An overcommitted generation's deferred file: inspect summarises it, check reads and
// verifies it, and a damaged one is explained naming the dataset.
BOOST_AUTO_TEST_CASE(deferred_files_are_inspected_and_checked) {
  DeferredArrays d;
  d.policy_step = 4;
  d.next_prompt = 17;
  d.config = R"({"samples_per_prompt": 2})";
  // Three samples: unfinished (2 response tokens), finished by a stop token (1), unfinished (0).
  for (const auto& [prompt, response, fin] : {std::tuple{3, 2, kDeferredRunning}, {2, 1, kDeferredStop}, {4, 0, kDeferredRunning}}) {
    for (int t = 0; t < prompt + response; ++t) d.tokens.push_back(5 + t);
    d.offsets.push_back(static_cast<std::int64_t>(d.tokens.size()));
    d.prompt_len.push_back(prompt);
    d.sample_id.push_back(static_cast<std::int64_t>(d.sample_id.size()) * 3 + 1);
    d.finished.push_back(fin);
    for (int t = 0; t < response; ++t) {
      d.logprobs.push_back(-0.5f);
      d.raw_logprobs.push_back(-0.7f);
      d.token_policy_step.push_back(3 + (t % 2));
    }
  }
  const std::string good = braid::test::scratch("good.deferred.h5").string();
  write_deferred_file(good, d);
  BOOST_TEST(!check_file(good).has_value());
  const auto s = inspect_file(good);
  BOOST_TEST(s["kind"] == "deferred");
  BOOST_TEST(s["samples"] == 3);
  BOOST_TEST(s["unfinished"] == 2);
  BOOST_TEST(s["finished_waiting_for_group"]["stop"] == 1);
  BOOST_TEST(s["response_tokens"] == 3);
  BOOST_TEST(s["next_prompt"] == 17);
  BOOST_TEST(s["steps_behind"]["max"] == 1.0);
  BOOST_TEST(s["config"]["samples_per_prompt"] == 2);
  BOOST_TEST(render_inspect_text(s).find("3 samples carried: 2 unfinished, 1 finished") != std::string::npos);

  DeferredArrays bad = d;
  bad.logprobs[1] = std::numeric_limits<float>::quiet_NaN();
  const std::string nan = braid::test::scratch("nan.deferred.h5").string();
  write_deferred_file(nan, bad);
  const auto why = check_file(nan);
  BOOST_REQUIRE(why.has_value());
  BOOST_TEST(why->find("/response/logprobs") != std::string::npos);
  bad = d;
  bad.token_policy_step[0] = 9;   // after the writer's own step
  const std::string future = braid::test::scratch("future.deferred.h5").string();
  write_deferred_file(future, bad);
  BOOST_REQUIRE(check_file(future).has_value());
  BOOST_TEST(check_file(future)->find("/response/policy_step") != std::string::npos);
}

#define BOOST_TEST_MODULE hf_import_export
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "hf/import_export.hpp"
#include "hf/safetensors.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include "tests/common/scratch.hpp"
#include "tests/model/family_configs.hpp"
#include "tests/common/tiny_models.hpp"

namespace fs = std::filesystem;
using braid::model::Model;
using braid::model::ModelConfig;
using braid::model::ModelOptions;

namespace {

ModelConfig tiny(bool tied = false) {
  return braid::test::tiny_config({.hidden = 16, .layers = 3, .intermediate = 24, .vocab = 40, .tied = tied});
}

using braid::test::scratch;

std::map<std::string, std::vector<float>> weights_of(const Model& m) {
  std::map<std::string, std::vector<float>> w;
  for (const auto& t : m.tensors()) w[t.name] = std::vector<float>(t.data, t.data + t.numel);
  return w;
}

// A folder as transformers' save_pretrained writes it, from a model's weights.
void write_hf_folder(const fs::path& dir, const ModelConfig& c, const Model& m, bool sharded, bool extra_buffer) {
  fs::create_directories(dir);
  auto cfg = braid::model::config_to_json(c);
  cfg["bos_token_id"] = 1;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  const auto& ts = m.tensors();
  std::vector<float> inv_freq(c.head_dim() / 2, 0.5f);
  if (!sharded) {
    braid::hf::SafetensorsWriter w(dir / "model.safetensors", braid::hf::StoreDtype::f32);
    for (const auto& t : ts) w.add(t.name, t.shape, t.data);
    if (extra_buffer) w.add("model.layers.0.self_attn.rotary_emb.inv_freq", {c.head_dim() / 2}, inv_freq.data());
    w.commit();
    return;
  }
  braid::json index{{"metadata", {{"total_size", 0}}}, {"weight_map", braid::json::object()}};
  braid::hf::SafetensorsWriter a(dir / "model-00001-of-00002.safetensors"), b(dir / "model-00002-of-00002.safetensors");
  for (std::size_t i = 0; i < ts.size(); ++i) {
    auto& w = i % 2 ? b : a;
    w.add(ts[i].name, ts[i].shape, ts[i].data);
    index["weight_map"][ts[i].name] = i % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  a.commit();
  b.commit();
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

}  // namespace

BOOST_AUTO_TEST_CASE(layout_lists_what_the_model_holds) {
  auto be = braid::backend::make_cpu_backend(1);
  for (bool tied : {false, true}) {
    const ModelConfig c = tiny(tied);
    for (auto range : std::vector<braid::model::LayerRange>{{0, 3}, {0, 1}, {1, 2}, {2, 3}}) {
      for (bool value : {false, true}) {
        const ModelOptions o{.layers = range, .lm_head = true, .value_head = value};
        Model m(c, o, *be);
        const auto spec = braid::model::tensor_layout(c, o);
        BOOST_TEST_REQUIRE(spec.size() == m.tensors().size());
        for (std::size_t i = 0; i < spec.size(); ++i) {
          BOOST_TEST(spec[i].name == m.tensors()[i].name);
          BOOST_TEST(spec[i].shape == m.tensors()[i].shape, boost::test_tools::per_element());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(import_sharded_folder_into_stages) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  Model src(c, {}, *be);
  src.init_random(21);
  const fs::path dir = scratch("hf_sharded");
  write_hf_folder(dir, c, src, true, false);
  const auto files = braid::hf::import_hf(dir, scratch("imported.h5"), {.stages = 3});
  BOOST_TEST(files.size() == 3u);
  Model dst(c, {}, *be);
  braid::checkpoint::load_weights(dst, braid::io::WeightShardSet(files));
  BOOST_TEST((weights_of(dst) == weights_of(src)));
  // The shard keeps the folder's own config.json, extra keys included.
  braid::io::WeightShardReader r(files[0]);
  BOOST_TEST(braid::json::parse(r.meta().model_config)["bos_token_id"] == 1);
}

BOOST_AUTO_TEST_CASE(export_then_import_round_trips_exactly) {
  auto be = braid::backend::make_cpu_backend(1);
  for (bool tied : {false, true}) {
    const ModelConfig c = tiny(tied);
    Model m(c, {}, *be);
    m.init_random(5);
    const fs::path ck = scratch(tied ? "rt_tied.h5" : "rt.h5");
    braid::checkpoint::save_weights(m, ck);
    const fs::path out = scratch(tied ? "hf_out_tied" : "hf_out");
    braid::hf::export_hf({ck}, out);

    braid::hf::SafetensorsReader st(out / "model.safetensors");
    BOOST_TEST(st.contains("lm_head.weight") == !tied);  // HF drops a tied head too
    BOOST_TEST(st.metadata().at("format") == "pt");
    const auto cfg = braid::load_json_file((out / "config.json").string());
    BOOST_TEST(cfg["architectures"][0] == "LlamaForCausalLM");
    BOOST_TEST(cfg["tie_word_embeddings"] == tied);
    BOOST_TEST(cfg["num_key_value_heads"] == 2);

    const auto back = braid::hf::import_hf(out, scratch(tied ? "back_tied.h5" : "back.h5"), {.stages = 2});
    Model again(c, {}, *be);
    braid::checkpoint::load_weights(again, braid::io::WeightShardSet(back));
    BOOST_TEST((weights_of(again) == weights_of(m)));
  }
}

BOOST_AUTO_TEST_CASE(bf16_export_is_close) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  Model m(c, {}, *be);
  m.init_random(8);
  const fs::path ck = scratch("bf.h5");
  braid::checkpoint::save_weights(m, ck);
  braid::hf::export_hf({ck}, scratch("hf_bf16"), {.dtype = braid::hf::StoreDtype::bf16});
  braid::hf::SafetensorsReader st(scratch("hf_bf16") / "model.safetensors");
  const auto& t = m.tensors()[1];
  BOOST_TEST(st.info(t.name).dtype == "BF16");
  const auto got = st.read(t.name);
  for (std::size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::abs(got[i] - t.data[i]) <= std::abs(t.data[i]) / 256);
}

BOOST_AUTO_TEST_CASE(import_skips_unused_buffers_and_refuses_missing_tensors) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  Model m(c, {}, *be);
  m.init_random(2);
  const fs::path dir = scratch("hf_extra");
  write_hf_folder(dir, c, m, false, true);
  BOOST_CHECK_NO_THROW(braid::hf::import_hf(dir, scratch("extra.h5")));

  // A config that promises more layers than the file has.
  ModelConfig more = c;
  more.num_hidden_layers = 4;
  std::ofstream(dir / "config.json") << braid::model::config_to_json(more).dump();
  try {
    braid::hf::import_hf(dir, scratch("missing.h5"));
    BOOST_FAIL("a folder missing layer 3 was imported");
  } catch (const braid::InputError& e) {
    BOOST_TEST(std::string(e.what()).find("model.layers.3.") != std::string::npos);
  }
  BOOST_TEST(!fs::exists(scratch("missing.h5")));
}

// tests/fixtures/hf/tiny_llama: a Hugging Face folder written by Python (struct + json,
// transformers' sharded layout) from the PyTorch reference model of
// tests/fixtures/model; braid must import it and reproduce PyTorch's logits.
BOOST_AUTO_TEST_CASE(imported_hf_folder_reproduces_pytorch_logits) {
  const fs::path fixtures = fs::path(std::getenv("BRAID_FIXTURES")) / "hf";
  const auto files = braid::hf::import_hf(fixtures / "tiny_llama", scratch("tiny_llama.h5"), {.stages = 2});
  braid::io::WeightShardSet set(files);
  const ModelConfig c = braid::checkpoint::config_of(set);
  auto be = braid::backend::make_cpu_backend(1);
  Model m(c, {}, *be);
  braid::checkpoint::load_weights(m, set);

  braid::hf::SafetensorsReader ref(fixtures / "tiny_llama_reference.safetensors");
  const auto tok_f = ref.read("tokens");
  const auto off_f = ref.read("offsets");
  const auto want = ref.read("logits");
  std::vector<std::int32_t> tokens(tok_f.begin(), tok_f.end());
  std::vector<std::int64_t> offsets(off_f.begin(), off_f.end());
  const auto n = static_cast<std::int64_t>(tokens.size());
  auto acts = m.make_activations({.max_tokens = n, .max_sequences = static_cast<std::int64_t>(offsets.size()) - 1});
  m.forward({tokens, offsets}, acts);
  std::vector<float> logits(static_cast<std::size_t>(n * c.vocab_size));
  m.lm_logits(acts.output(), n, logits.data());
  BOOST_TEST_REQUIRE(logits.size() == want.size());
  double max_ref = 0, max_err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(double(want[i])));
    max_err = std::max(max_err, std::abs(double(logits[i]) - want[i]));
  }
  BOOST_TEST_MESSAGE("max |logit error| " << max_err << " of max |logit| " << max_ref);
  BOOST_TEST(max_err / max_ref < 1e-4);

  // Exported again, every tensor is bit for bit the one Python wrote.
  braid::hf::export_hf(files, scratch("tiny_llama_out"));
  braid::hf::SafetensorsReader back(scratch("tiny_llama_out") / "model.safetensors");
  const auto index = braid::load_json_file((fixtures / "tiny_llama" / "model.safetensors.index.json").string());
  BOOST_TEST(back.names().size() == index["weight_map"].size());
  for (auto& [name, file] : index["weight_map"].items()) {
    braid::hf::SafetensorsReader orig(fixtures / "tiny_llama" / file.get<std::string>());
    BOOST_TEST((back.read(name) == orig.read(name)), name);
  }
}

// A LlamaForSequenceClassification reward model: score.weight, no LM head.
BOOST_AUTO_TEST_CASE(reward_model_imports_with_its_value_head) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  const ModelOptions rm{.lm_head = false, .value_head = true};
  Model src(c, rm, *be);
  src.init_random(12);
  const fs::path dir = scratch("hf_reward");
  write_hf_folder(dir, c, src, false, false);
  const auto files = braid::hf::import_hf(dir, scratch("reward.h5"));
  Model dst(c, rm, *be);
  braid::checkpoint::load_weights(dst, braid::io::WeightShardSet(files));
  BOOST_TEST((weights_of(dst) == weights_of(src)));
  BOOST_TEST(!braid::io::WeightShardReader(files[0]).contains("lm_head.weight"));

  // Neither head: refused, naming what is missing.
  fs::remove_all(dir);
  Model bare(c, {.lm_head = false}, *be);
  write_hf_folder(dir, c, bare, false, false);
  try {
    braid::hf::import_hf(dir, scratch("headless.h5"));
    BOOST_FAIL("a model without heads was imported");
  } catch (const braid::InputError& e) {
    BOOST_TEST(std::string(e.what()).find("lm_head.weight") != std::string::npos);
  }
}

// Llama 3.1/3.2 configs carry rope_scaling: import reads it into the checkpoint's config,
// and export writes it back, whether the shards keep the imported text or braid's own.
BOOST_AUTO_TEST_CASE(rope_scaling_survives_import_and_export) {
  auto be = braid::backend::make_cpu_backend(1);
  ModelConfig c = tiny();
  c.rope_scaling = {.type = braid::model::RopeScaling::Type::llama3, .factor = 8.0, .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0, .original_max_position_embeddings = 16};
  Model src(c, {}, *be);
  src.init_random(9);
  const fs::path dir = scratch("hf_llama31");
  write_hf_folder(dir, c, src, false, false);
  const auto files = braid::hf::import_hf(dir, scratch("llama31.h5"));
  const ModelConfig read = braid::checkpoint::config_of(braid::io::WeightShardSet(files));
  BOOST_TEST((read.rope_scaling.type == braid::model::RopeScaling::Type::llama3));
  BOOST_TEST(read.rope_scaling.factor == 8.0);
  BOOST_TEST(read.rope_scaling.original_max_position_embeddings == 16);
  BOOST_TEST((braid::model::rope_inv_freq(read) == braid::model::rope_inv_freq(c)));

  const fs::path out = scratch("hf_llama31_out");
  braid::hf::export_hf(files, out);
  const auto written = braid::load_json_file((out / "config.json").string());
  BOOST_TEST(written["rope_scaling"] == braid::model::rope_scaling_to_json(c.rope_scaling));
  BOOST_TEST(written["rope_scaling"]["rope_type"] == "llama3");

  // A checkpoint braid wrote itself (config_to_json) exports the same rope_scaling.
  const fs::path ck = scratch("linear_rope.h5");
  ModelConfig lin = tiny();
  lin.rope_scaling = {.type = braid::model::RopeScaling::Type::linear, .factor = 2.0};
  Model m(lin, {}, *be);
  m.init_random(3);
  braid::checkpoint::save_weights(m, ck);
  const fs::path out2 = scratch("hf_linear_out");
  braid::hf::export_hf({ck}, out2);
  const auto cfg2 = braid::load_json_file((out2 / "config.json").string());
  BOOST_TEST(cfg2["rope_scaling"] == (braid::json{{"rope_type", "linear"}, {"factor", 2.0}}));
}

namespace {

// A model of the family with every tensor random (biases and norm gains too).
void randomize(Model& m, std::uint64_t seed) {
  m.init_random(seed, 0.3);
  for (auto& t : m.tensors()) {
    if (t.shape.size() != 1) continue;
    for (std::int64_t i = 0; i < t.numel; ++i) t.data[i] = 0.5f + 0.01f * float((i * 7 + seed) % 13);
  }
}

// A folder of the family's config (with keys every transformers config carries) and the
// model's tensors, under the names given (default: braid's).
void write_family_folder(const fs::path& dir, braid::json config, const Model& m,
                         const std::function<std::string(const std::string&)>& rename = {}) {
  fs::create_directories(dir);
  config["bos_token_id"] = 1;
  config["eos_token_id"] = 2;
  config["torch_dtype"] = "float32";
  config["transformers_version"] = "4.51.0";
  config["use_cache"] = true;
  config["initializer_range"] = 0.02;
  config["attention_dropout"] = 0.0;
  std::ofstream(dir / "config.json") << config.dump(2);
  braid::hf::SafetensorsWriter w(dir / "model.safetensors", braid::hf::StoreDtype::f32);
  for (const auto& t : m.tensors()) w.add(rename ? rename(t.name) : t.name, t.shape, t.data);
  w.commit();
}

std::string refusal(const fs::path& dir) {
  try {
    braid::hf::import_hf(dir, scratch("refused.h5"));
  } catch (const braid::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Every family imports into stages with its quirks' tensors (biases, q/k norms, Gemma's four
// norms) and exports back bit for bit, as <Family>ForCausalLM.
BOOST_AUTO_TEST_CASE(every_family_imports_and_exports) {
  auto be = braid::backend::make_cpu_backend(1);
  for (const auto& f : braid::test::family_configs()) {
    BOOST_TEST_CONTEXT(f.name) {
      const ModelConfig c = f.parsed();
      Model src(c, {}, *be);
      randomize(src, 4);
      const fs::path dir = scratch("hf_family_" + std::string(braid::model::model_type_of(c.family)));
      fs::remove_all(dir);
      write_family_folder(dir, f.config, src);
      const auto files = braid::hf::import_hf(dir, scratch("family.h5"), {.stages = 2});
      Model dst(c, {}, *be);
      braid::checkpoint::load_weights(dst, braid::io::WeightShardSet(files));
      BOOST_TEST((weights_of(dst) == weights_of(src)));
      const fs::path out = scratch("hf_family_out");
      fs::remove_all(out);
      braid::hf::export_hf(files, out);
      const auto cfg = braid::load_json_file((out / "config.json").string());
      BOOST_TEST(cfg["architectures"][0] == std::string(braid::model::class_prefix_of(c.family)) + "ForCausalLM");
      BOOST_TEST(cfg["model_type"] == f.config["model_type"]);
      BOOST_TEST((braid::model::config_to_json(braid::model::parse_config(cfg, "exported")) ==
                  braid::model::config_to_json(c)));
      braid::hf::SafetensorsReader st(out / "model.safetensors");
      for (const auto& t : src.tensors()) BOOST_TEST((st.read(t.name) == std::vector<float>(t.data, t.data + t.numel)), t.name);
    }
  }
}

// A key or a tensor the config does not explain is refused, naming it, never dropped.
BOOST_AUTO_TEST_CASE(unexplained_keys_and_tensors_are_refused) {
  auto be = braid::backend::make_cpu_backend(1);
  const auto fams = braid::test::family_configs();
  const ModelConfig llama = tiny();
  Model m(llama, {}, *be);
  m.init_random(6);
  const fs::path dir = scratch("hf_unexplained");

  // A key braid does not implement.
  fs::remove_all(dir);
  braid::json cfg = braid::model::config_to_json(llama);
  cfg["quantization_config"] = {{"quant_method", "gptq"}};
  write_family_folder(dir, cfg, m);
  BOOST_TEST(refusal(dir).find("quantization_config: not a key braid reads for model_type \"llama\"") != std::string::npos);
  // A bias in a folder whose config declares none.
  fs::remove_all(dir);
  write_family_folder(dir, braid::model::config_to_json(llama), m);
  {
    braid::hf::SafetensorsWriter extra(dir / "model.safetensors", braid::hf::StoreDtype::f32);
    for (const auto& t : m.tensors()) extra.add(t.name, t.shape, t.data);
    const std::vector<float> bias(std::size_t(llama.num_attention_heads * llama.head_dim()), 0.5f);
    extra.add("model.layers.0.self_attn.q_proj.bias", {std::int64_t(bias.size())}, bias.data());
    extra.commit();
  }
  const std::string why = refusal(dir);
  BOOST_TEST(why.find("model.layers.0.self_attn.q_proj.bias") != std::string::npos, why);
  BOOST_TEST(why.find("refused rather than dropped") != std::string::npos, why);
  BOOST_TEST(!fs::exists(scratch("refused.h5")));
  // A Qwen3 folder without its q/k norms, under a qwen2 config: the norms are unexplained.
  const ModelConfig qwen3 = fams[3].parsed();
  Model q(qwen3, {}, *be);
  randomize(q, 2);
  fs::remove_all(dir);
  braid::json as_qwen2 = fams[3].config;
  as_qwen2["model_type"] = "qwen2";
  as_qwen2.erase("attention_bias");
  write_family_folder(dir, as_qwen2, q);
  BOOST_TEST(refusal(dir).find("_norm.weight") != std::string::npos);
  // Attention dropout would change training: refused.
  fs::remove_all(dir);
  cfg = braid::model::config_to_json(llama);
  write_family_folder(dir, cfg, m);
  cfg = braid::load_json_file((dir / "config.json").string());
  cfg["attention_dropout"] = 0.1;
  std::ofstream(dir / "config.json") << cfg.dump();
  BOOST_TEST(refusal(dir).find("attention_dropout") != std::string::npos);
}

// A Gemma3ForConditionalGeneration folder (both of transformers' naming schemes) gives its
// text model; the vision tower's tensors are passed over.
BOOST_AUTO_TEST_CASE(gemma3_conditional_generation_imports_its_text_model) {
  auto be = braid::backend::make_cpu_backend(1);
  const auto g3 = braid::test::family_configs()[5];
  const ModelConfig c = g3.parsed();
  Model src(c, {}, *be);
  randomize(src, 8);
  for (const char* scheme : {"language_model.model.", "model.language_model."}) {
    BOOST_TEST_CONTEXT(scheme) {
      const fs::path dir = braid::test::fresh_scratch("hf_gemma3_vision");
      braid::json text = g3.config;
      text.erase("architectures");
      const braid::json config{{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"},
                               {"text_config", text}, {"vision_config", {{"model_type", "siglip_vision_model"}}},
                               {"mm_tokens_per_image", 256}};
      std::ofstream(dir / "config.json") << config.dump(2);
      braid::hf::SafetensorsWriter w(dir / "model.safetensors", braid::hf::StoreDtype::f32);
      for (const auto& t : src.tensors()) w.add(std::string(scheme) + t.name.substr(6), t.shape, t.data);
      const std::vector<float> patch(12, 0.25f);
      w.add(std::string(scheme).starts_with("model") ? "model.vision_tower.patch_embedding.weight"
                                                      : "vision_tower.patch_embedding.weight",
            {3, 4}, patch.data());
      w.commit();
      const auto files = braid::hf::import_hf(dir, scratch("gemma3_text.h5"));
      BOOST_TEST((braid::checkpoint::config_of(braid::io::WeightShardSet(files)).family == braid::model::Family::gemma3));
      Model dst(c, {}, *be);
      braid::checkpoint::load_weights(dst, braid::io::WeightShardSet(files));
      BOOST_TEST((weights_of(dst) == weights_of(src)));
    }
  }
}

// Reward and value models both ways: ...ForSequenceClassification (no bias) and
// ...ForTokenClassification (a bias) import with their heads and export with the class and
// the one label transformers needs; mismatches are refused.
BOOST_AUTO_TEST_CASE(classification_heads_both_ways) {
  auto be = braid::backend::make_cpu_backend(1);
  const auto qwen2 = braid::test::family_configs()[2];
  const ModelConfig c = qwen2.parsed();
  for (bool token : {false, true}) {
    BOOST_TEST_CONTEXT((token ? "token" : "sequence")) {
      const ModelOptions o{.lm_head = false, .value_head = true, .value_bias = token};
      Model src(c, o, *be);
      randomize(src, 3);
      const fs::path dir = scratch("hf_classifier");
      fs::remove_all(dir);
      braid::json config = qwen2.config;
      config["architectures"] = {token ? "Qwen2ForTokenClassification" : "Qwen2ForSequenceClassification"};
      config["id2label"] = {{"0", "LABEL_0"}};
      config["label2id"] = {{"LABEL_0", 0}};
      write_family_folder(dir, config, src);
      const auto files = braid::hf::import_hf(dir, scratch("classifier.h5"));
      auto opened = braid::checkpoint::open_model(files.front(), *be, {}, false, true);
      BOOST_TEST((opened.model->find("score.bias") != nullptr) == token);
      const fs::path out = scratch("hf_classifier_out");
      fs::remove_all(out);
      braid::hf::export_hf(files, out);
      const auto cfg = braid::load_json_file((out / "config.json").string());
      BOOST_TEST(cfg["architectures"][0] == (token ? "Qwen2ForTokenClassification" : "Qwen2ForSequenceClassification"));
      BOOST_TEST(cfg["id2label"].size() == 1u);
      BOOST_TEST(!fs::exists(out / "generation_config.json"));
      braid::hf::SafetensorsReader st(out / "model.safetensors");
      BOOST_TEST(st.contains("score.bias") == token);
      BOOST_TEST(!st.contains("lm_head.weight"));
    }
  }
  // A reward model braid made (no class named, no bias) exports as a sequence classifier, or
  // as a token classifier with a zero bias when asked.
  const ModelOptions rm{.lm_head = false, .value_head = true};
  Model m(c, rm, *be);
  randomize(m, 5);
  const fs::path ck = scratch("braid_rm.h5");
  braid::checkpoint::save_weights(m, ck, {.config_json = qwen2.config.dump()});
  const fs::path out = scratch("hf_rm_out");
  fs::remove_all(out);
  braid::hf::export_hf({ck}, out);
  BOOST_TEST(braid::load_json_file((out / "config.json").string())["architectures"][0] == "Qwen2ForSequenceClassification");
  fs::remove_all(out);
  braid::hf::export_hf({ck}, out, {.value_head = braid::hf::ValueHeadClass::token});
  BOOST_TEST(braid::hf::SafetensorsReader(out / "model.safetensors").read("score.bias") == std::vector<float>{0.f});

  // Two labels, and a token classifier without its bias: refused.
  const fs::path dir = scratch("hf_bad_classifier");
  fs::remove_all(dir);
  braid::json config = qwen2.config;
  config["architectures"] = {"Qwen2ForTokenClassification"};
  write_family_folder(dir, config, m);
  BOOST_TEST(refusal(dir).find("score.bias") != std::string::npos);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << qwen2.config.dump();
  {
    braid::hf::SafetensorsWriter w(dir / "model.safetensors", braid::hf::StoreDtype::f32);
    for (const auto& t : m.tensors()) {
      if (t.name != "score.weight") w.add(t.name, t.shape, t.data);
    }
    const std::vector<float> two(std::size_t(2 * c.hidden_size), 0.1f);
    w.add("score.weight", {2, c.hidden_size}, two.data());
    w.commit();
  }
  BOOST_TEST(refusal(dir).find("num_labels") != std::string::npos);
}

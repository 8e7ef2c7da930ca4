#include "hf/export_tokenizer.hpp"

#include "core/files.hpp"
#include "tokenizer/tokenizer.hpp"

#include <optional>

namespace braid::hf {

namespace {

constexpr const char* kSpecialKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token", "additional_special_tokens"};

std::optional<std::int64_t> id_of(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it != cfg.end() && it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

std::string text_of(const tok::Tokenizer& tok, tok::TokenId id) {
  const tok::TokenId ids[] = {id};
  return tok.decode(ids, /*skip_special=*/false);
}

}  // namespace

json generation_config_json(const json& model_config, const tok::Tokenizer* tok, const GenerationDefaults& g) {
  json j = json::object();
  std::optional<std::int64_t> bos = tok && tok->bos() ? std::optional<std::int64_t>(*tok->bos()) : id_of(model_config, "bos_token_id");
  if (bos) j["bos_token_id"] = *bos;
  std::vector<std::int64_t> eos;
  if (tok && tok->eos()) eos.push_back(*tok->eos());
  if (auto it = model_config.find("eos_token_id"); it != model_config.end()) {
    for (const json& v : it->is_array() ? *it : json::array({*it})) {
      if (v.is_number_integer() && std::find(eos.begin(), eos.end(), v.get<std::int64_t>()) == eos.end()) {
        eos.push_back(v.get<std::int64_t>());
      }
    }
  }
  if (eos.size() == 1) j["eos_token_id"] = eos.front();
  else if (!eos.empty()) j["eos_token_id"] = eos;
  std::optional<std::int64_t> pad = tok && tok->pad() ? std::optional<std::int64_t>(*tok->pad()) : id_of(model_config, "pad_token_id");
  if (pad) j["pad_token_id"] = *pad;
  if (g.temperature <= 0 || g.top_k == 1) {
    j["do_sample"] = false;
  } else {
    j["do_sample"] = true;
    j["temperature"] = g.temperature;
    j["top_p"] = g.top_p;
    j["top_k"] = g.top_k;  // written even when 0 (off): transformers' default is 50
  }
  j["max_new_tokens"] = g.max_new_tokens;
  return j;
}

json special_tokens_map_json(const json& tokenizer_config, const tok::Tokenizer& tok) {
  json m = json::object();
  if (tokenizer_config.is_object()) {
    for (const char* key : kSpecialKeys) {
      auto it = tokenizer_config.find(key);
      if (it != tokenizer_config.end() && !it->is_null()) m[key] = *it;
    }
  }
  if (!m.contains("bos_token") && tok.bos()) m["bos_token"] = text_of(tok, *tok.bos());
  if (!m.contains("eos_token") && tok.eos()) m["eos_token"] = text_of(tok, *tok.eos());
  if (!m.contains("pad_token") && tok.pad()) m["pad_token"] = text_of(tok, *tok.pad());
  return m;
}

std::vector<std::filesystem::path> export_tokenizer_files(const std::filesystem::path& tokenizer_json,
                                                          const tok::Tokenizer& tok, const std::filesystem::path& out_dir,
                                                          std::int64_t model_max_length) {
  namespace fs = std::filesystem;
  const fs::path src = tokenizer_json.parent_path();
  std::vector<fs::path> written;
  auto copy = [&](const fs::path& from, const char* name) {
    fs::copy_file(from, out_dir / name, fs::copy_options::overwrite_existing);
    written.push_back(out_dir / name);
  };
  copy(tokenizer_json, "tokenizer.json");
  if (fs::exists(src / "tokenizer.model")) copy(src / "tokenizer.model", "tokenizer.model");
  json config;  // null when the tokenizer has no tokenizer_config.json
  if (fs::exists(src / "tokenizer_config.json")) {
    config = load_json_file((src / "tokenizer_config.json").string());
    copy(src / "tokenizer_config.json", "tokenizer_config.json");
  } else {
    // Without one, AutoTokenizer would guess a class from config.json (LlamaTokenizerFast,
    // with Llama-2's "<s>"): name the plain fast tokenizer and the special tokens instead.
    json written_config = special_tokens_map_json(json(), tok);
    written_config["tokenizer_class"] = "PreTrainedTokenizerFast";
    written_config["model_max_length"] = model_max_length;
    written_config["clean_up_tokenization_spaces"] = false;
    write_text_file((out_dir / "tokenizer_config.json").string(), written_config.dump(2) + "\n");
    written.push_back(out_dir / "tokenizer_config.json");
  }
  if (fs::exists(src / "special_tokens_map.json")) {
    copy(src / "special_tokens_map.json", "special_tokens_map.json");
  } else {
    write_text_file((out_dir / "special_tokens_map.json").string(), special_tokens_map_json(config, tok).dump(2) + "\n");
    written.push_back(out_dir / "special_tokens_map.json");
  }
  return written;
}

}  // namespace braid::hf

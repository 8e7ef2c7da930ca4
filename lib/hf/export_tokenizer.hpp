// What braid export writes beside the weights so that transformers loads the folder
// as it is (AutoTokenizer, AutoModelForCausalLM, model.generate):
//
//   tokenizer.json, tokenizer.model    copied as they are (the latter when present)
//   tokenizer_config.json              copied; written (PreTrainedTokenizerFast and the
//                                      special tokens) when the tokenizer has none
//   special_tokens_map.json            copied when present, else made from
//                                      tokenizer_config.json's special tokens (or the
//                                      tokenizer's BOS/EOS/PAD)
//   generation_config.json             BOS/EOS/PAD ids and the sampling braid-generate
//                                      uses (its defaults unless told otherwise)
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace braid::tok {
class Tokenizer;
}

namespace braid::hf {

// braid-generate's defaults (generate/stage.hpp).
struct GenerationDefaults {
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  int top_k = 0;  // 0: off
  std::int64_t max_new_tokens = 64;
};

// generation_config.json's content: ids from the tokenizer (when given) and from the
// model's config.json (bos/eos/pad_token_id; EOS ids of both are kept, the tokenizer's first).
json generation_config_json(const json& model_config, const tok::Tokenizer* tok, const GenerationDefaults& g);

// special_tokens_map.json's content from a tokenizer_config.json (null: none), or
// the tokenizer's own BOS/EOS/PAD where it names none.
json special_tokens_map_json(const json& tokenizer_config, const tok::Tokenizer& tok);

// Copies or writes the tokenizer files of the tokenizer.json at `tokenizer_json` into
// out_dir; returns the files written. model_max_length: for a tokenizer_config.json
// written here.
std::vector<std::filesystem::path> export_tokenizer_files(const std::filesystem::path& tokenizer_json,
                                                          const tok::Tokenizer& tok, const std::filesystem::path& out_dir,
                                                          std::int64_t model_max_length);

}  // namespace braid::hf

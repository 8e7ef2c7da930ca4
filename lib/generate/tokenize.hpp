// braid tokenize: what a model sees, as JSON. A text, each line of a prompt file (read as
// braid-generate reads it), or conversations rendered by the chat template, each to its
// token ids and back; or ids to text.
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::gen {

struct TokenizeOptions {
  std::string tokenizer = "byte";           // "byte", a tokenizer.json or a folder holding one
  std::optional<std::string> text;          // a text, encoded as transformers' tokenizer(text) encodes it
  bool specials = true;                     // text: add the special tokens tokenizer(text) adds (BOS ...)
  std::string prompts;                      // a prompt file (braid-generate's JSON Lines)
  std::string chat;                         // JSON Lines of conversations {"messages", "tools", "chat_template_kwargs"}
  bool generation_prompt = true;            // chat: render with the generation prompt
  std::vector<std::int32_t> ids;            // ids to decode
};

// One JSON object per input: {"text", "ids", "tokens" (each id's text), "decoded"} and,
// for prompt lines, "line" and "id"; for conversations, the rendered "text" and the byte
// ranges of its {% generation %} blocks. InputError naming the file and field.
std::vector<ordered_json> tokenize(const TokenizeOptions& o);

}  // namespace braid::gen

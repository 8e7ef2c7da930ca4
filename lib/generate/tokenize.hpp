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
  std::string tools;                        // chat, prompts: a JSON file of tool schemas for lines without "tools"
  std::string chat_template_kwargs;         // chat, prompts: a JSON object of keyword arguments under each line's own
  std::vector<std::int32_t> ids;            // ids to decode
};

// One JSON object per input: {"text", "ids", "tokens" (each id's text), "decoded"} and,
// for prompt lines, "line" and "id"; for conversations, the rendered "text", the byte
// ranges of its {% generation %} blocks and, rendered without the generation prompt,
// what training learns of it: "learnt" (the byte ranges of its assistant turns,
// tok::ChatTemplate::assistant_spans) and "loss_mask" (1 for each learnt token, else 0).
// InputError naming the file and field.
std::vector<ordered_json> tokenize(const TokenizeOptions& o);

}  // namespace braid::gen

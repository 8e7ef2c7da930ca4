// The chat template that renders the conversations of a JSON Lines file (prompts,
// SFT examples, preference pairs): the chat_template of the tokenizer_config.json
// beside a Hugging Face tokenizer, loaded when a first line with "messages" asks for it.
#pragma once

#include "tokenizer/chat_template.hpp"

#include <optional>
#include <string>

namespace braid::data {

class LazyChatTemplate {
 public:
  // from: the tokenizer (spec or path) whose template renders the file's conversations;
  // what: what needs it, as the refusal names it ("chat prompts", "conversations").
  LazyChatTemplate(std::string from, std::string what) : from_(std::move(from)), what_(std::move(what)) {}

  // tok::ChatError on "messages" when `from` is no Hugging Face tokenizer (none, or the
  // byte tokenizer); an InputError naming tokenizer_config.json when it has no template
  // braid recognises.
  const tok::ChatTemplate& get();

 private:
  std::string from_, what_;
  std::optional<tok::ChatTemplate> template_;
};

}  // namespace braid::data

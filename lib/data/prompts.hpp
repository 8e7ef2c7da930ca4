// Prompt files (braid-generate's and braid eval's): JSON Lines, one prompt per line,
//
//   {"prompt": "What is 6*7?", "answer": 42}   encoded with the special tokens transformers'
//                                              tokenizer(text) adds (BOS for most models)
//   {"text": "Count to ten:"}                  the same ("text" and "prompt" are one field)
//   {"tokens": [256, 67, 111], "id": 7}        ids as they are (no BOS added)
//   {"messages": [{"role": "system", "content": "Be terse."},
//                 {"role": "user", "content": "What is 6*7?"}]}
//                                              rendered by the model's chat template
//                                              (tokenizer_config.json beside the tokenizer,
//                                              tokenizer/chat_template.hpp) with the
//                                              generation prompt, encoded as it is: the
//                                              template writes BOS itself; beside
//                                              "messages", "tools" (JSON schemas) and
//                                              "chat_template_kwargs" ({"enable_thinking":
//                                              false}) go to the template
//
// with an optional "id" (a string or an integer) that names the prompt in messages.
// Every other key is an extra field ("answer", "level", ...): the line's extra fields,
// "id" included, go with each of its samples into the shards (io::PromptOrigin) for
// rewards that check a response against them. Blank lines are skipped. Every bad line is reported, each as
// FILE:LINE: FIELD: PROBLEM, in one InputError: lines that are not JSON objects, none
// or several of "prompt", "text" and "tokens", ids outside the model's vocabulary,
// empty prompts, prompts too long for the model, messages the template refuses
// (a bad role, roles that do not alternate, FILE:LINE: messages[1].role: ...). A
// chat_template the tokenizer_config.json does not have, or braid does not recognise,
// is an InputError naming that file.
#pragma once

#include "tokenizer/chat_template.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid::tok {
class Tokenizer;
}

namespace braid::data {

struct PromptLine {
  std::int64_t line = 0;              // 1-based line number in the file
  std::string id;                     // "" when the line had none
  std::vector<std::int32_t> tokens;   // never empty
  std::string extra = "{}";           // the line's extra fields, as a JSON object's text
};

struct PromptFileOptions {
  const tok::Tokenizer* tokenizer = nullptr;  // for "text" prompts (needed only if there are any)
  std::int32_t vocab_size = 0;                // the model's: ids must be in [0, vocab_size)
  std::int64_t max_tokens = 0;                // a prompt must have fewer tokens than this (0: no cap)
  std::int64_t limit = 0;                     // read only the first `limit` prompts (0: all)
  std::string chat_template_from;             // the tokenizer (spec or path) whose chat template renders "messages"
  tok::ChatDefaults chat;                     // tools and template keyword arguments of lines without their own
};

// The prompts of a file ("-": stdin). InputError listing every bad line.
std::vector<PromptLine> read_prompts(const std::string& path, const PromptFileOptions& opt);

// The same for text that came from `origin` (used in messages).
std::vector<PromptLine> parse_prompts(std::string_view text, const std::string& origin, const PromptFileOptions& opt);

}  // namespace braid::data

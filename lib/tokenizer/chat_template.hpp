// A model's chat template (tokenizer_config.json's "chat_template"), rendered the way
// Hugging Face transformers renders it with apply_chat_template(messages,
// add_generation_prompt=...).
//
// braid has no Jinja engine. It recognises the templates of the families it knows by
// their text (chat_template_known.cpp: Llama 3, Mistral [INST] with and without the
// system turn folded into the last user turn, ChatML with and without Qwen2's default
// system turn, Gemma) and renders each with a small renderer that reproduces it: the
// template's own BOS/EOS text, its trimming, its role-alternation and system-turn
// rules, and its error messages. Text that matches none of them is refused with an
// InputError naming the file and listing what is supported, rather than rendered
// approximately. Whitespace that Jinja would drop (inside tags, around "-" trimmed
// tags, comments) and the spelling of string literals ('\n' or a newline) do not
// affect recognition.
//
// Only the roles "system", "user" and "assistant" and string contents are accepted.
#pragma once

#include "core/json.hpp"

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::tok {

struct ChatMessage {
  std::string role;
  std::string content;
};

// A conversation the template refuses; field says where ("messages[2].role").
class ChatError : public std::runtime_error {
 public:
  ChatError(std::string field, const std::string& problem) : std::runtime_error(problem), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

enum class ChatFamily {
  llama3,          // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>, BOS before the first turn
  mistral,         // BOS [INST] user [/INST]assistant</s>, strict alternation, no system turn
  mistral_folded,  // BOS [INST] user[/INST] assistant</s>; a leading system turn joins the last user turn
  chatml,          // <|im_start|>role\n...<|im_end|>\n
  qwen2,           // ChatML with "You are a helpful assistant." when no system turn is given
  gemma,           // BOS <start_of_turn>user|model\n...<end_of_turn>\n, no system turn
};

class ChatTemplate {
 public:
  // Recognises cfg["chat_template"] (a string, or a list of {"name", "template"} of which
  // "default" is taken) and reads the bos_token/eos_token the template uses. InputError
  // naming origin and the field when it is missing, unrecognised or lacks a token.
  static ChatTemplate from_config(const json& cfg, const std::string& origin);
  // tokenizer_config.json beside the tokenizer: `tokenizer` is a tokenizer.json path
  // or a folder holding one ("byte" has no chat template: InputError).
  static ChatTemplate load(const std::string& tokenizer);

  // The conversation rendered as text (special tokens written out, "<|begin_of_text|>"),
  // to be encoded without adding BOS. ChatError when the template refuses it.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  ChatFamily family() const { return family_; }
  const std::string& name() const { return name_; }      // "llama3", "mistral", ...
  const std::string& origin() const { return origin_; }  // the tokenizer_config.json read

 private:
  ChatFamily family_ = ChatFamily::chatml;
  std::string name_, origin_, bos_, eos_;
};

// The families braid renders, for messages ("llama3, mistral, ...").
std::string supported_chat_templates();

// The messages of a JSON array [{"role": ..., "content": ...}, ...]; ChatError naming
// the element and field ("messages[1].content") otherwise.
std::vector<ChatMessage> chat_messages_of(const json& messages);

}  // namespace braid::tok

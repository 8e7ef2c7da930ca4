// A model's chat template, rendered as Hugging Face transformers' apply_chat_template
// renders it: the template's Jinja text run by braid's Jinja engine (lib/jinja, jinja2's
// semantics in transformers' environment) with the variables transformers passes:
// messages, tools (null when none), documents (null), add_generation_prompt, the
// special tokens tokenizer_config.json sets (bos_token, eos_token, unk_token,
// pad_token, ..., additional_special_tokens) and the conversation's template keyword
// arguments (chat_template_kwargs, such as {"enable_thinking": false}).
//
// The template comes from tokenizer_config.json's "chat_template" (a string, or a list
// of {"name", "template"} of which "default" is taken), else from a chat_template.jinja
// beside it, as transformers reads them.
//
// The rendered text is encoded as it is (transformers' apply_chat_template(tokenize=
// True) adds no special tokens: the template writes its BOS itself where it has one).
#pragma once

#include "core/json.hpp"
#include "jinja/template.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::tok {

// A conversation the template refuses (its raise_exception, or an error the template
// meets on this conversation); field says where ("messages", "messages[2].role").
class ChatError : public std::runtime_error {
 public:
  ChatError(std::string field, const std::string& problem) : std::runtime_error(problem), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

// A conversation as transformers takes it: messages (each an object with a "role" and,
// unless it carries "tool_calls", a "content"; other keys such as "tool_calls", "name",
// "tool_call_id", "reasoning_content" go to the template as they are), tools (JSON
// schemas, or null), and keyword arguments for the template (an object).
struct Conversation {
  ordered_json messages = ordered_json::array();
  ordered_json tools;
  ordered_json kwargs = ordered_json::object();
};

// Checks the shape of a conversation's parts (ChatError naming the field: "messages[1].
// role", "tools", "chat_template_kwargs"); tools and kwargs may be null.
Conversation conversation_of(const ordered_json& messages, const ordered_json& tools, const ordered_json& kwargs);

// The tools and template keyword arguments of a run, for lines without their own.
struct ChatDefaults {
  ordered_json tools;
  ordered_json kwargs = ordered_json::object();
};

// A run's defaults from the command line: a JSON file of tool schemas ("" : none) and a
// JSON object of template keyword arguments ("" : none). UsageError naming the option.
ChatDefaults chat_defaults(const std::string& tools_file, const std::string& kwargs_json);

// The conversation of one line of data: its messages (line[messages_key]), its "tools"
// (else the run's) and its "chat_template_kwargs" over the run's. ChatError naming the
// field.
Conversation conversation_of_line(const ordered_json& line, const ChatDefaults& run, const char* messages_key = "messages");

// The text a template rendered, the byte ranges its {% generation %} blocks wrote, and
// for each message the text the template wrote while its loop was at that message
// (jinja::Rendered::item_spans; nullopt where it wrote none).
struct ChatText {
  std::string text;
  std::vector<jinja::Span> generation;
  std::vector<std::optional<jinja::Span>> messages;
};

class Tokenizer;
using TokenId = std::int32_t;

// A rendered text's tokens (encoded as it is, adding nothing) and which of them are
// learnt: those that cover any of the spans' text (ChatTemplate::assistant_spans, in
// text order).
struct LearntEncoding {
  std::vector<TokenId> ids;
  std::vector<bool> learnt;
};
LearntEncoding encode_learnt(const Tokenizer& tok, const std::string& text, const std::vector<jinja::Span>& spans);

class ChatTemplate {
 public:
  // The template of a tokenizer_config.json read from `origin` (its folder holds a
  // chat_template.jinja when cfg has no chat_template). InputError naming origin and
  // the field when there is none or it does not parse (with the line and column).
  static ChatTemplate from_config(const json& cfg, const std::string& origin);
  // tokenizer_config.json beside the tokenizer: `tokenizer` is a tokenizer.json path or
  // a folder holding one ("byte" has no chat template: UsageError).
  static ChatTemplate load(const std::string& tokenizer);

  // The conversation rendered. ChatError when the template refuses it.
  ChatText render(const Conversation& c, bool add_generation_prompt) const;

  // The text of the assistant turns of c, from its message `first` on, in `whole` (c
  // rendered without the generation prompt): what a model trained on the conversation
  // learns. Where the template marks the assistant's text with {% generation %}
  // (transformers' assistant masks), those blocks. Otherwise each assistant message's
  // text (what the template wrote for it, its end of turn included) without the turn's
  // header: the longest start of the generation prompt (the conversation before the
  // turn rendered with add_generation_prompt, less that rendered without) the text
  // begins with, cut back to a boundary of that prompt's tokens (tok) where the text
  // departs from it inside one. A header that differs from the generation prompt, as
  // Qwen3's earlier turns without the thinking its prompt opens with, thus stays out,
  // and an earlier turn rendered otherwise within the whole (its thinking dropped) is
  // found as the whole has it. ChatError naming the message when the template writes
  // nothing for an assistant message, or renders no conversation before it.
  std::vector<jinja::Span> assistant_spans(const Conversation& c, const ChatText& whole, const Tokenizer& tok,
                                           std::size_t first = 0) const;

  const std::string& origin() const { return origin_; }  // the file the template came from
  bool has_generation_blocks() const { return template_.has_generation(); }
  // Limits and the clock strftime_now reads (tests fix it).
  jinja::RenderOptions& options() { return options_; }

 private:
  std::string origin_;
  jinja::Template template_;
  jinja::Value specials_ = jinja::Value::dict();
  jinja::RenderOptions options_;
};

}  // namespace braid::tok

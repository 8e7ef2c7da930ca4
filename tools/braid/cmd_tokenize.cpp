// braid tokenize: a text, a prompt file or conversations to token ids and back, as JSON
// Lines on stdout (lib/generate/tokenize.hpp).
#include <iostream>
#include <memory>

#include "generate/tokenize.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_tokenize_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<gen::TokenizeOptions>();
  auto text = std::make_shared<std::string>();
  auto no_specials = std::make_shared<bool>(false);
  auto no_generation_prompt = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand(
      "tokenize", "Show what a model sees: a TEXT, each prompt of a prompt file (--prompts, as braid-generate reads it) "
                  "or each conversation of a JSON Lines file (--chat: {\"messages\", \"tools\", \"chat_template_kwargs\"} "
                  "rendered by the chat template) to token ids and back; or ids to text (--decode). JSON Lines on stdout");
  sub->add_option("text", *text, "A text, encoded with the special tokens transformers' tokenizer(text) adds");
  sub->add_option("--tokenizer", o->tokenizer, "byte, a tokenizer.json or a Hugging Face folder")->capture_default_str();
  sub->add_option("--prompts", o->prompts, "A prompt file (JSON Lines: prompt, text, tokens or messages)");
  sub->add_option("--chat", o->chat, "JSON Lines of conversations, rendered by tokenizer_config.json's chat template");
  sub->add_option("--decode", o->ids, "Token ids to decode (comma-separated)")->delimiter(',');
  sub->add_flag("--no-specials", *no_specials, "TEXT: no BOS or other special tokens around it");
  sub->add_flag("--no-generation-prompt", *no_generation_prompt,
                "--chat: render without the generation prompt, and show what training learns (\"learnt\" byte ranges, "
                "\"loss_mask\" per token)");
  sub->add_option("--tools", o->tools, "--chat, --prompts: a JSON file of tool schemas for lines without \"tools\"");
  sub->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                  "--chat, --prompts: template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": false}' "
                  "(a line's own \"chat_template_kwargs\" win)");
  verbs.add(sub, [o, text, no_specials, no_generation_prompt, sub] {
    if (sub->count("text") > 0) o->text = *text;
    o->specials = !*no_specials;
    o->generation_prompt = !*no_generation_prompt;
    // A token that is part of a character (byte-level BPE) shows as U+FFFD, as transformers'
    // decode([id]) does.
    for (const auto& j : gen::tokenize(*o)) std::cout << j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << '\n';
    return 0;
  });
}

}  // namespace braid::driver

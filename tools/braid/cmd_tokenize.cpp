// braid tokenize: a text, a prompt file or conversations to token ids and back, as JSON
// Lines on stdout (lib/generate/tokenize.hpp).
#include <iostream>
#include <memory>

#include "generate/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_tokenize_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<gen::TokenizeOptions>();
  auto* sub = app.add_subcommand(
      "tokenize", "Show what a model sees: a TEXT, each prompt of a prompt file (--prompts, as braid-generate reads it) "
                  "or each conversation of a JSON Lines file (--chat: {\"messages\", \"tools\", \"chat_template_kwargs\"} "
                  "rendered by the chat template) to token ids and back; or ids to text (--decode). JSON Lines on stdout");
  cli::add_schema_options(*sub, *o, gen::tokenize_schema());
  verbs.add(sub, [o] {
    // A token that is part of a character (byte-level BPE) shows as U+FFFD, as transformers'
    // decode([id]) does.
    for (const auto& j : gen::tokenize(*o)) std::cout << j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << '\n';
    return 0;
  });
}

}  // namespace braid::driver

// The chat templates braid recognises (chat_template_known.cpp), and the normal form in
// which a tokenizer_config.json's template is compared with them.
#pragma once

#include "tokenizer/chat_template.hpp"

#include <span>
#include <string>
#include <string_view>

namespace braid::tok::detail {

struct KnownTemplate {
  ChatFamily family;
  const char* name;    // "llama3", ...
  const char* models;  // where this text is found, for docs and messages
  const char* text;    // the template as Hugging Face ships it
};

std::span<const KnownTemplate> known_chat_templates();

// The template with what Jinja (as transformers configures it: trim_blocks and
// lstrip_blocks) would not print removed: comments, whitespace inside tags and around
// "-" trimmed tags, the newline after a block tag, the indentation before one; string
// literals are decoded, so that '\n' and a newline compare equal. Throws
// std::invalid_argument on an unterminated tag.
std::string normalize_jinja(std::string_view text);

}  // namespace braid::tok::detail

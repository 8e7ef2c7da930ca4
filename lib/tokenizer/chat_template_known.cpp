// The chat templates braid recognises, as Hugging Face ships them in
// tokenizer_config.json, and the normal form they are compared in.
#include "tokenizer/chat_template_known.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace braid::tok::detail {

namespace {

// Each text is the template's own; chat_template.cpp's renderer for its family
// reproduces what Jinja prints from it (tests/tokenizer/test_chat_template.cpp checks
// that against renderings made by Jinja itself, tests/fixtures/chat).
constexpr KnownTemplate kKnown[] = {
    {ChatFamily::llama3, "llama3", "Meta-Llama-3-8B-Instruct, Meta-Llama-3-70B-Instruct",
     R"({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})"},
    {ChatFamily::mistral, "mistral", "Mistral-7B-Instruct-v0.1, Mistral-7B-Instruct-v0.2 (first releases)",
     R"({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})"},
    {ChatFamily::mistral_folded, "mistral-system-folded",
     "Mistral-7B-Instruct-v0.2, Mistral-7B-Instruct-v0.3 (system turn folded into the last user turn)",
     R"({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
)"},
    {ChatFamily::chatml, "chatml", "ChatML models without a default system turn (OpenHermes-2.5-Mistral-7B, ...)",
     R"({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})"},
    {ChatFamily::qwen2, "qwen2", "Qwen1.5-*-Chat, Qwen2-*-Instruct",
     R"({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})"},
    {ChatFamily::gemma, "gemma", "gemma-7b-it, gemma-2b-it, gemma-2-9b-it, gemma-2-27b-it",
     R"({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %})"},
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A Jinja string literal's value (Python's escapes, the common ones).
std::string decode_literal(std::string_view body) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      default: out += '\\'; out += e; break;
    }
  }
  return out;
}

// A tag's inside without whitespace, its string literals in one spelling.
std::string normalize_tag_body(std::string_view body) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '\'' || c == '"') {
      std::size_t j = i + 1;
      while (j < body.size() && body[j] != c) j += body[j] == '\\' ? 2 : 1;
      if (j >= body.size()) throw std::invalid_argument("unterminated string literal");
      out += '\x01';  // a delimiter no template text holds
      out += decode_literal(body.substr(i + 1, j - i - 1));
      out += '\x01';
      i = j;
    } else if (!is_space(c)) {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::span<const KnownTemplate> known_chat_templates() { return kKnown; }

std::string normalize_jinja(std::string_view text) {
  struct Piece {
    bool tag = false;
    char kind = 0;  // '{' expression, '%' block, '#' comment
    bool trim_left = false, trim_right = false;
    std::string body;
  };
  std::vector<Piece> pieces;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t open = [&] {
      for (std::size_t p = text.find('{', pos); p != std::string_view::npos; p = text.find('{', p + 1)) {
        if (p + 1 < text.size() && (text[p + 1] == '{' || text[p + 1] == '%' || text[p + 1] == '#')) return p;
      }
      return std::string_view::npos;
    }();
    if (open == std::string_view::npos) {
      pieces.push_back({.body = std::string(text.substr(pos))});
      break;
    }
    if (open > pos) pieces.push_back({.body = std::string(text.substr(pos, open - pos))});
    Piece t{.tag = true, .kind = text[open + 1]};
    std::size_t i = open + 2;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) t.trim_left = text[i++] == '-';
    const char close = t.kind == '{' ? '}' : t.kind;
    std::size_t end = std::string_view::npos;
    for (std::size_t j = i; j + 1 < text.size(); ++j) {
      if (t.kind != '#' && (text[j] == '\'' || text[j] == '"')) {
        const char q = text[j];
        for (++j; j < text.size() && text[j] != q; j += text[j] == '\\' ? 2 : 1) {}
        continue;
      }
      if (text[j] == close && text[j + 1] == '}') {
        end = j;
        break;
      }
    }
    if (end == std::string_view::npos) throw std::invalid_argument("unterminated tag");
    std::size_t body_end = end;
    if (body_end > i && (text[body_end - 1] == '-' || text[body_end - 1] == '+')) {
      t.trim_right = text[body_end - 1] == '-';
      --body_end;
    }
    if (t.kind != '#') t.body = normalize_tag_body(text.substr(i, body_end - i));
    pieces.push_back(std::move(t));
    pos = end + 2;
  }
  // Apply what Jinja does to the text between tags, then drop comments.
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    Piece& p = pieces[k];
    if (p.tag) continue;
    const Piece* before = k > 0 ? &pieces[k - 1] : nullptr;
    const Piece* after = k + 1 < pieces.size() ? &pieces[k + 1] : nullptr;
    std::string& s = p.body;
    // Right side first, decided on the text as written (lstrip_blocks looks for a line start).
    if (after && after->trim_left) {
      while (!s.empty() && is_space(s.back())) s.pop_back();
    } else if (after && after->kind != '{') {  // lstrip_blocks: the indentation before a block tag
      std::size_t n = s.size();
      while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) --n;
      if (n == 0 ? k == 0 : s[n - 1] == '\n') s.erase(n);
    }
    if (before && before->trim_right) {
      s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), is_space));
    } else if (before && before->kind != '{' && s.starts_with('\n')) {
      s.erase(0, 1);  // trim_blocks
    }
  }
  std::string out;
  for (const Piece& p : pieces) {
    if (!p.tag) out += p.body;
    else if (p.kind != '#') out += std::string("{") + p.kind + p.body + (p.kind == '{' ? '}' : p.kind) + "}";
  }
  return out;
}

}  // namespace braid::tok::detail

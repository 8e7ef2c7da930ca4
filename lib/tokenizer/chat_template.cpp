// Recognising a tokenizer_config.json's chat template and rendering conversations with
// it (chat_template.hpp); the template texts are in chat_template_known.cpp.
#include "tokenizer/chat_template.hpp"

#include "core/error.hpp"
#include "tokenizer/chat_template_known.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace braid::tok {

namespace {

// Python's str.strip() whitespace (what Jinja's trim filter removes), in UTF-8.
std::size_t space_len(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if ((b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x20)) return 1;
  auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  if (b == 0xC2 && (at(1) == 0x85 || at(1) == 0xA0)) return 2;               // U+0085, U+00A0
  if (b == 0xE1 && at(1) == 0x9A && at(2) == 0x80) return 3;                 // U+1680
  if (b == 0xE2 && at(1) == 0x80 && (at(2) <= 0x8A || at(2) == 0xA8 || at(2) == 0xA9 || at(2) == 0xAF)) {
    return at(2) >= 0x80 ? 3 : 0;                                            // U+2000..200A, 2028, 2029, 202F
  }
  if (b == 0xE2 && at(1) == 0x81 && at(2) == 0x9F) return 3;                 // U+205F
  if (b == 0xE3 && at(1) == 0x80 && at(2) == 0x80) return 3;                 // U+3000
  return 0;
}

std::string trim(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    const std::size_t n = space_len(s, begin);
    if (n == 0) break;
    begin += n;
  }
  // From the right: find the end of the last non-space character by scanning forward.
  std::size_t end = begin;
  for (std::size_t i = begin; i < s.size();) {
    const std::size_t n = space_len(s, i);
    if (n == 0) {
      ++i;
      end = i;
    } else {
      i += n;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::string role_field(std::size_t i) { return fmt::format("messages[{}].role", i); }

// The templates' own raise_exception messages, tied to the message that triggered them.
[[noreturn]] void refuse(std::size_t i, const std::string& what) { throw ChatError(role_field(i), what); }

void check_alternation(std::span<const ChatMessage> m, std::size_t first, const char* message) {
  for (std::size_t i = first; i < m.size(); ++i) {
    if ((m[i].role == "user") != ((i - first) % 2 == 0)) refuse(i, message);
  }
}

std::optional<std::string> token_text(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

bool uses_bos(ChatFamily f) {
  return f == ChatFamily::llama3 || f == ChatFamily::mistral || f == ChatFamily::mistral_folded || f == ChatFamily::gemma;
}
bool uses_eos(ChatFamily f) { return f == ChatFamily::mistral || f == ChatFamily::mistral_folded; }

}  // namespace

std::string supported_chat_templates() {
  std::string s;
  for (const auto& k : detail::known_chat_templates()) {
    if (!s.empty()) s += "; ";
    s += fmt::format("{} ({})", k.name, k.models);
  }
  return s;
}

ChatTemplate ChatTemplate::from_config(const json& cfg, const std::string& origin) {
  if (!cfg.is_object()) throw InputError(origin, "", "must be a JSON object");
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) {
    throw InputError(origin, "chat_template", "is missing: chat prompts (\"messages\") need the model's chat template");
  }
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_array()) {
    for (const json& named : *it) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        text = named["template"].get<std::string>();
      }
    }
    if (text.empty()) throw InputError(origin, "chat_template", "is a list of named templates without a \"default\" one");
  } else {
    throw InputError(origin, "chat_template", "must be a string (or a list of {\"name\", \"template\"})");
  }
  std::string normal;
  try {
    normal = detail::normalize_jinja(text);
  } catch (const std::invalid_argument& e) {
    throw InputError(origin, "chat_template", fmt::format("is not a readable Jinja template ({})", e.what()));
  }
  const detail::KnownTemplate* hit = nullptr;
  for (const auto& k : detail::known_chat_templates()) {
    if (detail::normalize_jinja(k.text) == normal) hit = &k;
  }
  if (hit == nullptr) {
    throw InputError(origin, "chat_template",
                     fmt::format("is not a template braid can render: braid has no Jinja engine and renders only the "
                                 "templates it recognises: {}. Render the conversation yourself and give it as "
                                 "\"prompt\" text",
                                 supported_chat_templates()));
  }
  ChatTemplate t;
  t.family_ = hit->family;
  t.name_ = hit->name;
  t.origin_ = origin;
  auto need = [&](const char* key, bool used, std::string& into) {
    if (!used) return;
    auto v = token_text(cfg, key);
    if (!v) throw InputError(origin, key, fmt::format("is missing: the {} chat template writes it", hit->name));
    into = *v;
  };
  need("bos_token", uses_bos(t.family_), t.bos_);
  need("eos_token", uses_eos(t.family_), t.eos_);
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& tokenizer) {
  if (tokenizer.empty() || tokenizer == "byte") {
    throw UsageError("chat prompts (\"messages\") need a Hugging Face tokenizer whose tokenizer_config.json has a "
                     "chat_template (--tokenizer); the byte tokenizer has none");
  }
  std::filesystem::path p(tokenizer);
  const auto dir = std::filesystem::is_directory(p) ? p : p.parent_path();
  const auto cfg = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(cfg)) {
    throw InputError(cfg.string(), "", "is missing: chat prompts (\"messages\") need the model's chat template from it");
  }
  return from_config(load_json_file(cfg.string()), cfg.string());
}

std::vector<ChatMessage> chat_messages_of(const json& messages) {
  if (!messages.is_array()) throw ChatError("messages", "must be an array of {\"role\", \"content\"} objects");
  if (messages.empty()) throw ChatError("messages", "is empty");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw ChatError(at, "must be an object {\"role\": ..., \"content\": ...}");
    for (const auto& [key, _] : m.items()) {
      if (key != "role" && key != "content") {
        throw ChatError(at + "." + key, "is not a message field braid renders (a message has \"role\" and \"content\")");
      }
    }
    auto role = m.find("role");
    auto content = m.find("content");
    if (role == m.end()) throw ChatError(at + ".role", "is missing");
    if (content == m.end()) throw ChatError(at + ".content", "is missing");
    if (!role->is_string()) throw ChatError(at + ".role", "must be a string");
    if (!content->is_string()) throw ChatError(at + ".content", "must be a string (braid renders text content only)");
    const auto r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant") {
      throw ChatError(at + ".role", fmt::format("is \"{}\": braid renders the roles system, user and assistant", r));
    }
    out.push_back({r, content->get<std::string>()});
  }
  return out;
}

std::string ChatTemplate::render(std::span<const ChatMessage> m, bool add_generation_prompt) const {
  if (m.empty()) throw ChatError("messages", "is empty");
  std::string out;
  switch (family_) {
    case ChatFamily::llama3:
      for (std::size_t i = 0; i < m.size(); ++i) {
        if (i == 0) out += bos_;
        out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + trim(m[i].content) + "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFamily::mistral:
      out += bos_;
      for (std::size_t i = 0; i < m.size(); ++i) {
        if ((m[i].role == "user") != (i % 2 == 0)) {
          refuse(i, "Conversation roles must alternate user/assistant/user/assistant/...");
        }
        if (m[i].role == "user") out += "[INST] " + m[i].content + " [/INST]";
        else if (m[i].role == "assistant") out += m[i].content + eos_;
        else refuse(i, "Only user and assistant roles are supported!");
      }
      break;  // this template writes no generation prompt: "[/INST]" already asks for the answer
    case ChatFamily::mistral_folded: {
      const bool system = m.front().role == "system";
      const std::size_t first = system ? 1 : 0;
      out += bos_;
      for (std::size_t i = first; i < m.size(); ++i) {
        if ((m[i].role == "user") != ((i - first) % 2 == 0)) {
          refuse(i, "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...");
        }
        if (m[i].role == "user") {
          // The system turn goes into the last message only, and only if that is a user turn.
          if (system && i + 1 == m.size()) out += "[INST] " + m.front().content + "\n\n" + m[i].content + "[/INST]";
          else out += "[INST] " + m[i].content + "[/INST]";
        } else if (m[i].role == "assistant") {
          out += " " + m[i].content + eos_;
        } else {
          refuse(i, "Only user and assistant roles are supported, with the exception of an initial optional system message!");
        }
      }
      break;
    }
    case ChatFamily::chatml:
    case ChatFamily::qwen2:
      for (std::size_t i = 0; i < m.size(); ++i) {
        if (family_ == ChatFamily::qwen2 && i == 0 && m.front().role != "system") {
          out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
        }
        out += "<|im_start|>" + m[i].role + "\n" + m[i].content + "<|im_end|>\n";
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFamily::gemma:
      out += bos_;
      if (m.front().role == "system") refuse(0, "System role not supported");
      check_alternation(m, 0, "Conversation roles must alternate user/assistant/user/assistant/...");
      for (const ChatMessage& msg : m) {
        out += "<start_of_turn>" + std::string(msg.role == "assistant" ? "model" : msg.role) + "\n" + trim(msg.content) +
               "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
  }
  return out;
}

}  // namespace braid::tok

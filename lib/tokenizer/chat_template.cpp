// Reading a model's chat template and rendering conversations with it (chat_template.hpp).
#include "tokenizer/chat_template.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace braid::tok {

namespace {

constexpr const char* kSpecialKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token"};

std::optional<std::string> token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Conversation conversation_of(const ordered_json& messages, const ordered_json& tools, const ordered_json& kwargs) {
  if (!messages.is_array()) throw ChatError("messages", "must be an array of {\"role\", \"content\"} objects");
  if (messages.empty()) throw ChatError("messages", "is empty");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& m = messages[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw ChatError(at, "must be an object {\"role\": ..., \"content\": ...}");
    auto role = m.find("role");
    if (role == m.end()) throw ChatError(at + ".role", "is missing");
    if (!role->is_string()) throw ChatError(at + ".role", "must be a string");
    auto content = m.find("content");
    const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (content == m.end() && !calls) throw ChatError(at + ".content", "is missing");
    if (content != m.end() && !(content->is_string() || content->is_null() || content->is_array())) {
      throw ChatError(at + ".content", "must be a string, null or an array of content parts");
    }
    if (calls && !m["tool_calls"].is_array()) throw ChatError(at + ".tool_calls", "must be an array");
  }
  if (!tools.is_null() && !tools.is_array()) throw ChatError("tools", "must be an array of tool schemas (or null)");
  if (tools.is_array()) {
    for (std::size_t i = 0; i < tools.size(); ++i) {
      if (!tools[i].is_object()) throw ChatError(fmt::format("tools[{}]", i), "must be an object (a JSON schema)");
    }
  }
  if (!kwargs.is_null() && !kwargs.is_object()) throw ChatError("chat_template_kwargs", "must be an object");
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
    if (kwargs.is_object() && kwargs.contains(reserved)) {
      throw ChatError(fmt::format("chat_template_kwargs.{}", reserved), "is set by braid, not by keyword arguments");
    }
  }
  return {messages, tools, kwargs.is_null() ? ordered_json::object() : kwargs};
}

ChatDefaults chat_defaults(const std::string& tools_file, const std::string& kwargs_json) {
  ChatDefaults d;
  if (!tools_file.empty()) {
    const std::string text = read_text_file(tools_file);
    if (!json_depth_problem(text)) d.tools = ordered_json::parse(text, nullptr, false);
    if (d.tools.is_discarded() || !d.tools.is_array()) {
      throw UsageError(fmt::format("--tools: {} must hold a JSON array of tool schemas", tools_file));
    }
  }
  if (!kwargs_json.empty()) {
    d.kwargs = json_depth_problem(kwargs_json) ? ordered_json(ordered_json::value_t::discarded)
                                               : ordered_json::parse(kwargs_json, nullptr, false);
    if (d.kwargs.is_discarded() || !d.kwargs.is_object()) {
      throw UsageError(fmt::format("--chat-template-kwargs must be a JSON object such as {{\"enable_thinking\": false}}, "
                                   "got {}", kwargs_json));
    }
  }
  return d;
}

Conversation conversation_of_line(const ordered_json& line, const ChatDefaults& run, const char* messages_key) {
  const ordered_json none;
  const auto messages = line.find(messages_key);
  ordered_json kwargs = run.kwargs.is_object() ? run.kwargs : ordered_json::object();
  if (auto k = line.find("chat_template_kwargs"); k != line.end()) {
    if (!k->is_object()) throw ChatError("chat_template_kwargs", "must be an object");
    for (auto it = k->begin(); it != k->end(); ++it) kwargs[it.key()] = it.value();
  }
  const auto tools = line.find("tools");
  try {
    return conversation_of(messages == line.end() ? none : *messages, tools == line.end() ? run.tools : *tools, kwargs);
  } catch (const ChatError& e) {
    if (std::string(messages_key) == "messages" || !e.field().starts_with("messages")) throw;
    throw ChatError(messages_key + e.field().substr(8), e.what());
  }
}

ChatTemplate ChatTemplate::from_config(const json& cfg, const std::string& origin) {
  if (!cfg.is_object()) throw InputError(origin, "", "must be a JSON object");
  std::string text, source = origin;
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) {
    const auto jinja_file = std::filesystem::path(origin).parent_path() / "chat_template.jinja";
    if (!std::filesystem::exists(jinja_file)) {
      throw InputError(origin, "chat_template",
                       "is missing (and there is no chat_template.jinja beside it): conversations need the model's chat "
                       "template");
    }
    text = read_text_file(jinja_file.string());
    source = jinja_file.string();
  } else if (it->is_string()) {
    text = it->get<std::string>();
    source = origin + " (chat_template)";
  } else if (it->is_array()) {
    bool found = false;
    for (const json& named : *it) {
      if (named.is_object() && named.value("name", json()).is_string() && named["name"] == "default" &&
          named.contains("template") && named["template"].is_string()) {
        text = named["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) throw InputError(origin, "chat_template", "is a list of named templates without a \"default\" one");
    source = origin + " (chat_template \"default\")";
  } else {
    throw InputError(origin, "chat_template", "must be a string (or a list of {\"name\", \"template\"})");
  }
  ChatTemplate t;
  t.origin_ = source;
  try {
    t.template_ = jinja::Template::parse(text, source, t.options_.limits);
  } catch (const jinja::Error& e) {
    throw InputError(origin, "chat_template", fmt::format("does not parse: {}", e.what()));
  }
  for (const char* key : kSpecialKeys) {
    if (auto v = cfg.find(key); v != cfg.end()) {
      if (auto s = token_text(*v)) t.specials_.as_dict()->set(key, *s);
    }
  }
  if (auto v = cfg.find("additional_special_tokens"); v != cfg.end() && v->is_array() && !v->empty()) {
    std::vector<jinja::Value> names;
    for (const json& x : *v) {
      if (auto s = token_text(x)) names.emplace_back(*s);
    }
    t.specials_.as_dict()->set("additional_special_tokens", jinja::Value::list(std::move(names)));
  }
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& tokenizer) {
  if (tokenizer.empty() || tokenizer == "byte") {
    throw UsageError("conversations (\"messages\") need a Hugging Face tokenizer with a chat template (--tokenizer); "
                     "the byte tokenizer has none");
  }
  std::filesystem::path p(tokenizer);
  const auto dir = std::filesystem::is_directory(p) ? p : p.parent_path();
  const auto cfg = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(cfg)) {
    throw InputError(cfg.string(), "", "is missing: conversations (\"messages\") need the model's chat template from it");
  }
  return from_config(load_json_file(cfg.string()), cfg.string());
}

ChatText ChatTemplate::render(const Conversation& c, bool add_generation_prompt) const {
  jinja::Value vars = jinja::Value::dict();
  auto& d = *vars.as_dict();
  for (const auto& [k, v] : specials_.as_dict()->items()) d.set(k, v);
  for (auto it = c.kwargs.begin(); it != c.kwargs.end(); ++it) d.set(it.key(), jinja::Value::from_json(it.value()));
  const jinja::Value messages = jinja::Value::from_json(c.messages);
  d.set("messages", messages);
  d.set("tools", jinja::Value::from_json(c.tools));
  d.set("documents", jinja::None{});
  d.set("add_generation_prompt", add_generation_prompt);
  jinja::RenderOptions options = options_;
  options.tracked_items = messages.as_list()->items;
  try {
    jinja::Rendered r = template_.render(vars, options);
    return {std::move(r.text), std::move(r.generation), std::move(r.item_spans)};
  } catch (const jinja::Error& e) {
    // The template's own refusal reads as transformers reports it; any other error says
    // where in the template it happened.
    throw ChatError("messages", e.kind() == jinja::Error::raised ? e.message() : std::string(e.what()));
  }
}

LearntEncoding encode_learnt(const Tokenizer& tok, const std::string& text, const std::vector<jinja::Span>& spans) {
  Encoding e = tok.encode_with_offsets(text);
  LearntEncoding out{std::move(e.ids), std::vector<bool>(e.spans.size(), false)};
  std::size_t s = 0;
  for (std::size_t k = 0; k < e.spans.size(); ++k) {
    while (s < spans.size() && spans[s].end <= e.spans[k].begin) ++s;
    out.learnt[k] = s < spans.size() && e.spans[k].end > spans[s].begin;
  }
  return out;
}

std::vector<jinja::Span> ChatTemplate::assistant_spans(const Conversation& c, const ChatText& whole,
                                                       const Tokenizer& tok, std::size_t first) const {
  const std::size_t n = c.messages.size();
  std::optional<std::size_t> from;  // where message `first` begins in whole
  for (std::size_t i = first; i < n && !from; ++i) {
    if (whole.messages[i]) from = whole.messages[i]->begin;
  }
  std::vector<jinja::Span> out;
  if (has_generation_blocks()) {
    for (const jinja::Span& g : whole.generation) {
      if (from && g.begin >= *from) out.push_back(g);
    }
    return out;
  }
  for (std::size_t i = first; i < n; ++i) {
    if (c.messages[i].value("role", "") != "assistant") continue;
    const std::string at = fmt::format("messages[{}]", i);
    const auto& span = whole.messages[i];
    if (!span) throw ChatError(at, fmt::format("the chat template ({}) writes no text for this assistant turn", origin_));
    Conversation head = c;
    head.messages = ordered_json::array();
    for (std::size_t k = 0; k < i; ++k) head.messages.push_back(c.messages[k]);
    std::string before, prompted;
    try {
      before = render(head, false).text;
      prompted = render(head, true).text;
    } catch (const ChatError& e) {
      throw ChatError(at, fmt::format("the chat template ({}) renders no conversation before this assistant turn, so "
                                      "the turn's header is not known: {}",
                                      origin_, e.what()));
    }
    if (!prompted.starts_with(before)) {
      throw ChatError(at, fmt::format("the chat template ({}) renders the conversation before this turn differently "
                                      "with the generation prompt than without, so the turn's header is not known",
                                      origin_));
    }
    const std::string_view header = std::string_view(prompted).substr(before.size());
    const std::string_view turn = std::string_view(whole.text).substr(span->begin, span->end - span->begin);
    std::size_t shared = 0;
    while (shared < header.size() && shared < turn.size() && header[shared] == turn[shared]) ++shared;
    if (shared < header.size()) {
      // The turn leaves the prompt inside it: keep only the prompt's tokens it holds whole.
      std::size_t cut = 0;
      for (const TokenSpan& t : tok.encode_with_offsets(header).spans) {
        if (t.end <= shared) cut = std::max(cut, t.end);
      }
      shared = cut;
    }
    if (span->begin + shared < span->end) out.push_back({span->begin + shared, span->end});
  }
  return out;
}

}  // namespace braid::tok

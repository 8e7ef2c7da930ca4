#include "data/prompts.hpp"

#include "data/chat_lines.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <iterator>

namespace braid::data {
namespace {

// Past this many, a file is surely wrong as a whole; listing more only buries the first.
constexpr std::size_t kMaxListed = 20;


// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string parse_message(const std::exception& e) {
  std::string_view m = e.what();
  if (!m.empty() && m.front() == '[') {
    const auto close = m.find("] ");
    if (close != std::string_view::npos) m.remove_prefix(close + 2);
  }
  return std::string(m);
}

std::string type_name(const json& v) { return v.is_null() ? "null" : v.type_name(); }

// The keys that hold the prompt itself; every other key of a line is an extra field.
constexpr const char* kTextKeys[] = {"prompt", "text"};
constexpr const char* kPromptKeys[] = {"prompt", "text", "tokens", "messages"};
// The keys of a conversation beside its messages; they are not extra fields either.
constexpr const char* kChatKeys[] = {"tools", "chat_template_kwargs"};

// Appends ids to out.tokens, failing `field` on an id outside the model's vocabulary.
bool add_ids(const std::vector<std::int32_t>& ids, const PromptFileOptions& opt, const char* field, Checker& c,
             PromptLine& out) {
  for (auto id : ids) {
    if (id < 0 || id >= opt.vocab_size) {
      c.fail(field, fmt::format("encodes to id {}, outside the model's vocabulary [0, {}) (tokenizer and model "
                                "do not match?)",
                                id, opt.vocab_size));
      return false;
    }
    out.tokens.push_back(id);
  }
  return true;
}

// A chat prompt: the line's conversation (messages, tools, chat_template_kwargs) rendered
// by the model's template with the generation prompt, then encoded as it is (the template
// writes BOS itself, as transformers' apply_chat_template(tokenize=True) does). `line` is
// the line's text, read again keeping the key order of its objects (tool schemas are
// printed in the order given).
void read_messages(std::string_view line, const PromptFileOptions& opt, LazyChatTemplate& chat, Checker& c,
                   PromptLine& out) {
  std::string text;
  try {
    const tok::Conversation conversation = tok::conversation_of_line(ordered_json::parse(line), opt.chat);
    text = chat.get().render(conversation, /*add_generation_prompt=*/true).text;
  } catch (const tok::ChatError& e) {
    c.fail(e.field(), e.what());
    return;
  }
  if (opt.tokenizer == nullptr) throw std::logic_error("read_prompts: a chat prompt needs a tokenizer");
  add_ids(opt.tokenizer->encode(text), opt, "messages", c, out);
  if (out.tokens.empty()) c.fail("messages", "renders to no tokens");
}

// Reads one line's object into `out`; problems go to `c` as "field: problem".
void read_line(std::string_view line, const json& obj, const PromptFileOptions& opt, LazyChatTemplate& chat, Checker& c,
               PromptLine& out) {
  json extra = json::object();
  for (const auto& [key, value] : obj.items()) {
    const bool chat_key = obj.contains("messages") && std::find(std::begin(kChatKeys), std::end(kChatKeys), key) != std::end(kChatKeys);
    if (!chat_key && std::find(std::begin(kPromptKeys), std::end(kPromptKeys), key) == std::end(kPromptKeys)) extra[key] = value;
  }
  out.extra = extra.dump();
  if (auto it = obj.find("id"); it != obj.end()) {
    if (it->is_string()) out.id = it->get<std::string>();
    else if (it->is_number_integer()) out.id = std::to_string(it->get<std::int64_t>());
    else c.fail("id", "must be a string or an integer, found " + type_name(*it));
  }
  std::vector<std::string> given;
  for (const char* k : kPromptKeys) {
    if (obj.contains(k)) given.emplace_back(fmt::format("\"{}\"", k));
  }
  if (given.size() != 1) {
    std::vector<std::string> keys;
    for (const auto& [key, _] : obj.items()) keys.push_back(key);
    c.fail("", given.empty() ? fmt::format("has none of \"prompt\", \"text\", \"tokens\" and \"messages\" (give one; its keys: {})",
                                           keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", ")))
                             : fmt::format("has {} (give one)", fmt::join(given, " and ")));
    return;
  }
  const char* text_key = nullptr;
  for (const char* k : kTextKeys) {
    if (obj.contains(k)) text_key = k;
  }
  const auto text = text_key ? obj.find(text_key) : obj.end();
  const auto tokens = obj.find("tokens");
  if (const auto messages = obj.find("messages"); messages != obj.end()) {
    read_messages(line, opt, chat, c, out);
    if (!c.ok()) return;
  } else if (tokens != obj.end()) {
    if (!tokens->is_array()) {
      c.fail("tokens", "must be an array of token ids, found " + type_name(*tokens));
      return;
    }
    if (tokens->empty()) c.fail("tokens", "is empty (a prompt needs at least one token, e.g. BOS)");
    for (std::size_t i = 0; i < tokens->size(); ++i) {
      const json& t = (*tokens)[i];
      const std::string field = fmt::format("tokens[{}]", i);
      if (!t.is_number_integer()) {
        c.fail(field, "must be an integer token id, found " + type_name(t));
        continue;
      }
      const auto id = t.get<std::int64_t>();
      if (id < 0 || id >= opt.vocab_size) {
        c.fail(field, fmt::format("{} is outside the model's vocabulary [0, {})", id, opt.vocab_size));
        continue;
      }
      out.tokens.push_back(static_cast<std::int32_t>(id));
    }
  } else {
    if (!text->is_string()) {
      c.fail(text_key, "must be a string, found " + type_name(*text));
      return;
    }
    const auto& s = text->get_ref<const std::string&>();
    if (s.empty()) {
      c.fail(text_key, "is empty");
      return;
    }
    if (opt.tokenizer == nullptr) throw std::logic_error("read_prompts: a text prompt needs a tokenizer");
    // The special tokens transformers' tokenizer(text) adds: BOS for most models, none
    // for Qwen's.
    if (!add_ids(tok::encode_text(*opt.tokenizer, s), opt, text_key, c, out)) return;
  }
  const auto n = static_cast<std::int64_t>(out.tokens.size());
  if (opt.max_tokens > 0 && n >= opt.max_tokens) {
    c.fail(obj.contains("messages") ? "messages" : tokens != obj.end() ? "tokens" : text_key,
           fmt::format("has {} tokens, leaving no room to generate: the model's max length is {}", n, opt.max_tokens));
  }
}

}  // namespace

std::vector<PromptLine> parse_prompts(std::string_view text, const std::string& origin, const PromptFileOptions& opt) {
  std::vector<PromptLine> prompts;
  std::vector<std::string> problems;
  std::string first_location;  // "file:line" of the first problem, for a lone one
  std::size_t bad_lines = 0;
  LazyChatTemplate chat_template(opt.chat_template_from, "chat prompts");
  for_each_jsonl_line(text, opt.limit, [&](std::int64_t line_no, std::string_view line) {
    Checker c(origin);
    PromptLine p{.line = line_no};
    json obj;
    std::optional<std::string> bad = json_depth_problem(line);
    if (!bad) {
      try {
        obj = json::parse(line);
      } catch (const json::exception& e) {  // a syntax error, or a number beyond double's range (1e400)
        bad = "not valid JSON: " + parse_message(e);
      }
    }
    if (bad) c.fail("", *bad);
    else if (obj.is_object()) read_line(line, obj, opt, chat_template, c, p);
    else c.fail("", "expected a JSON object like {\"prompt\": \"...\"}, found " + type_name(obj));
    if (c.ok()) {
      prompts.push_back(std::move(p));
      return;
    }
    const std::string location = fmt::format("{}:{}", origin, line_no);
    if (bad_lines++ == 0) first_location = location;
    for (const auto& problem : c.problems()) {
      if (problems.size() < kMaxListed) problems.push_back(location + ": " + problem);
    }
  });
  if (problems.size() == 1) throw InputError(first_location, "", problems.front().substr(first_location.size() + 2));
  if (!problems.empty()) {
    if (problems.size() == kMaxListed) problems.push_back(fmt::format("(the first shown; {} bad lines in all)", bad_lines));
    throw InputError(origin, std::move(problems));
  }
  if (prompts.empty()) throw InputError(origin, "", "has no prompts (one JSON object per line: {\"prompt\": \"...\"})");
  return prompts;
}

std::vector<PromptLine> read_prompts(const std::string& path, const PromptFileOptions& opt) {
  return parse_prompts(read_text_file(path), path, opt);
}

}  // namespace braid::data

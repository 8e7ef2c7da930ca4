#include "data/text_examples.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "data/chat_lines.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

namespace braid::data {

namespace {

struct TextLine {
  std::int64_t line = 0;
  json obj;
  std::string text;  // the line as read, for conversations (parsed again keeping key order)
};

// Every non-blank line as a JSON object with exactly the keys of one of `shapes` (the
// first shape's as strings, or arrays of messages where `messages_allowed`; the other
// shapes' checked by the caller); one InputError for all bad lines.
std::vector<TextLine> read_lines(const std::string& path, const std::vector<std::vector<std::string>>& shapes,
                                 bool messages_allowed = false) {
  // A conversation's tools and template keyword arguments may stand beside any shape.
  static const std::vector<std::string> chat_keys = {"tools", "chat_template_kwargs"};
  const std::string text = read_text_file(path);
  Checker c(path);
  std::vector<TextLine> out;
  for_each_jsonl_line(text, 0, [&](std::int64_t n, std::string_view line) {
    const std::string where = fmt::format("line {}", n);
    json obj = parse_json_or_discarded(line);
    if (obj.is_discarded() || !obj.is_object()) {
      c.fail(where, "is not a JSON object");
      return;
    }
    const auto* shape = &shapes.front();
    for (const auto& s : shapes) {
      if (obj.contains(s.front())) {
        shape = &s;
        break;
      }
    }
    if (shape == &shapes.front()) {
      for (const auto& k : *shape) {
        if (!(messages_allowed && obj.contains(k) && obj[k].is_array())) c.string(obj, where, k);
      }
    }
    std::vector<std::string> allowed = *shape;
    allowed.insert(allowed.end(), chat_keys.begin(), chat_keys.end());
    c.no_unknown_keys(obj, where, allowed);
    out.push_back({n, std::move(obj), std::string(line)});
  });
  c.check();
  if (out.empty()) throw InputError(path, "", "holds no examples");
  return out;
}

void check_sequence(Checker& c, const std::string& where, const std::vector<std::int32_t>& seq, std::int32_t vocab,
                    std::int64_t max_len) {
  if (max_len > 0 && static_cast<std::int64_t>(seq.size()) > max_len) {
    c.fail(where, fmt::format("{} tokens exceed the model's {} positions", seq.size(), max_len));
  }
  for (auto t : seq) {
    if (t < 0 || t >= vocab) {
      c.fail(where, fmt::format("token {} is outside the model's vocabulary of {}", t, vocab));
      break;
    }
  }
}

// A prompt and a completion as one sequence: the two texts encoded as one (token
// boundaries as Hugging Face makes them), the special tokens transformers' tokenizer(text)
// puts in front (BOS for most models) when `bos` (plain text; a chat template writes its
// own), EOS behind when `eos` (as TRL appends eos_token to a completion); prompt_len
// covers those and every token that covers prompt text only.
struct Joined {
  std::vector<std::int32_t> seq;
  std::int32_t prompt_len = 0;
  bool response_empty = false;
  std::vector<float> mask;  // per token, 1 where learnt (conversations); empty: every response token
};

Joined join(const tok::Tokenizer& tok, const std::string& prompt, const std::string& completion, bool bos, bool eos) {
  const tok::JoinedEncoding e = tok::encode_joined(tok, prompt, completion);
  Joined j;
  if (bos) j.seq = tok.specials_before();
  j.prompt_len = static_cast<std::int32_t>(j.seq.size() + e.prompt_tokens);
  j.seq.insert(j.seq.end(), e.ids.begin(), e.ids.end());
  j.response_empty = e.prompt_tokens == e.ids.size();
  if (eos && tok.eos()) j.seq.push_back(*tok.eos());
  return j;
}

// A conversation rendered by its chat template (as transformers' apply_chat_template
// renders it, no BOS or EOS added: the template writes its own), its assistant turns from
// message `first` on learnt (ChatTemplate::assistant_spans) and nothing else: prompt_len
// covers the tokens before the first learnt one, `mask` marks the learnt tokens (those
// that cover any of an assistant turn's text). ChatError naming the field when the
// template refuses the conversation or writes no text to learn.
Joined join_conversation(const tok::Tokenizer& tok, const tok::ChatTemplate& t, const tok::Conversation& c,
                         std::size_t first, const std::string& key) {
  const tok::ChatText whole = t.render(c, false);
  const std::vector<jinja::Span> spans = t.assistant_spans(c, whole, tok, first);
  if (spans.empty()) {
    throw tok::ChatError(key, t.has_generation_blocks()
                                  ? fmt::format("the chat template ({}) marks no {{% generation %}} text to learn in "
                                                "this conversation", t.origin())
                                  : std::string("has no assistant turn to learn"));
  }
  tok::LearntEncoding e = tok::encode_learnt(tok, whole.text, spans);
  Joined j;
  j.seq = std::move(e.ids);
  j.mask.assign(e.learnt.begin(), e.learnt.end());
  const auto learnt = std::find(j.mask.begin(), j.mask.end(), 1.0f);
  j.prompt_len = static_cast<std::int32_t>(learnt - j.mask.begin());
  j.response_empty = learnt == j.mask.end();
  return j;
}

// Sequences and their masks, gathered before the batch is made: a batch where some
// sequence has a mask gets loss_mask, every response token of the others learnt.
class Gathered {
 public:
  void add(Joined j) {
    masked_ = masked_ || !j.mask.empty();
    all_.push_back(std::move(j));
  }
  io::SampleBatch batch() const {
    io::SampleBatch b;
    for (const Joined& j : all_) b.add(j.seq, j.prompt_len, static_cast<std::int64_t>(b.size()));
    if (!masked_) return b;
    auto& mask = b.loss_mask.emplace(b.token_count(), 0.0f);
    for (std::size_t i = 0; i < all_.size(); ++i) {
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
        mask[t] = all_[i].mask.empty() ? 1.0f : all_[i].mask[t - b.begin(i)];
      }
    }
    return b;
  }

 private:
  std::vector<Joined> all_;
  bool masked_ = false;
};

}  // namespace

io::SampleBatch read_sft_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                               std::int64_t max_len, const std::string& chat_template_from,
                               const tok::ChatDefaults& chat_defaults) {
  const auto lines = read_lines(path, {{"prompt", "response"}, {"messages"}});
  LazyChatTemplate chat(chat_template_from, "conversations");
  Checker c(path);
  Gathered b;
  for (const auto& l : lines) {
    const std::string where = fmt::format("line {}", l.line);
    Joined j;
    if (l.obj.contains("messages")) {
      try {
        const tok::ChatTemplate& t = chat.get();
        const tok::Conversation conv = tok::conversation_of_line(ordered_json::parse(l.text), chat_defaults);
        j = join_conversation(tok, t, conv, 0, "messages");
      } catch (const tok::ChatError& e) {
        c.fail(where + "." + e.field(), e.what());
        continue;
      }
      if (j.prompt_len == 0) c.fail(where + ".messages", "renders no prompt to start from (a first user turn)");
    } else {
      if (!l.obj["prompt"].is_string() || !l.obj["response"].is_string()) continue;  // reported by read_lines
      j = join(tok, l.obj["prompt"], l.obj["response"], true, true);
      if (j.prompt_len == 0) c.fail(where + ".prompt", "is empty and the tokenizer has no BOS to start from");
    }
    if (j.response_empty) c.fail(where + (l.obj.contains("messages") ? ".messages" : ".response"), "is empty");
    check_sequence(c, where, j.seq, vocab_size, max_len);
    b.add(std::move(j));
  }
  c.check();
  return b.batch();
}

// A preference pair's prompt conversation with one completion (a string: the
// assistant's answer; an array: the messages that follow), the completion's assistant
// turns learnt (join_conversation).
Joined join_preference(const tok::Tokenizer& tok, const tok::ChatTemplate& t, const ordered_json& line,
                       const char* key, const tok::ChatDefaults& run) {
  tok::Conversation c = tok::conversation_of_line(line, run, "prompt");
  const std::size_t n = c.messages.size();
  const ordered_json& completion = line[key];
  if (completion.is_string()) {
    c.messages.push_back({{"role", "assistant"}, {"content", completion.get<std::string>()}});
  } else {
    try {
      const tok::Conversation more = tok::conversation_of(completion, ordered_json(), ordered_json());
      for (const auto& m : more.messages) c.messages.push_back(m);
    } catch (const tok::ChatError& e) {
      throw tok::ChatError(key + e.field().substr(std::string("messages").size()), e.what());
    }
  }
  if (c.messages.back().value("role", "") != "assistant") {
    throw tok::ChatError(key, "must end with the assistant's message, the turn compared");
  }
  try {
    return join_conversation(tok, t, c, n, key);
  } catch (const tok::ChatError& e) {
    // "messages[i]..." of the joined conversation as the line names it: prompt[i] or key[i - n].
    std::size_t i = 0;
    if (std::sscanf(e.field().c_str(), "messages[%zu]", &i) != 1) throw;
    const std::string rest = e.field().substr(e.field().find(']') + 1);
    throw tok::ChatError(i < n ? fmt::format("prompt[{}]{}", i, rest)
                               : (completion.is_string() ? std::string(key) : fmt::format("{}[{}]{}", key, i - n, rest)),
                         e.what());
  }
}

io::SampleBatch read_preference_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                                      std::int64_t max_len, const std::string& chat_template_from,
                                      const tok::ChatDefaults& chat_defaults) {
  const auto lines = read_lines(path, {{"prompt", "chosen", "rejected"}}, /*messages_allowed=*/true);
  LazyChatTemplate chat(chat_template_from, "conversations");
  Checker c(path);
  Gathered b;
  for (const auto& l : lines) {
    const bool conversation = l.obj["prompt"].is_array();
    for (const char* key : {"chosen", "rejected"}) {
      const std::string where = fmt::format("line {}.{}", l.line, key);
      Joined j;
      if (conversation) {
        try {
          j = join_preference(tok, chat.get(), ordered_json::parse(l.text), key, chat_defaults);
        } catch (const tok::ChatError& e) {
          // Problems of the prompt's messages are the same for both completions: named once.
          const bool prompt_problem = e.field().starts_with("prompt");
          if (!prompt_problem || std::string(key) == "chosen") c.fail(fmt::format("line {}.{}", l.line, e.field()), e.what());
          continue;  // c.check() below throws: the batch is never used
        }
      } else {
        if (!l.obj[key].is_string()) {
          c.fail(where, "must be a string when the prompt is (a conversation's prompt is an array of messages)");
          continue;
        }
        j = join(tok, l.obj["prompt"], l.obj[key], true, true);
        if (j.prompt_len == 0) c.fail(fmt::format("line {}.prompt", l.line), "is empty and the tokenizer has no BOS to start from");
      }
      if (j.response_empty) c.fail(where, "is empty");
      check_sequence(c, where, j.seq, vocab_size, max_len);
      b.add(std::move(j));
    }
  }
  c.check();
  return b.batch();
}

}  // namespace braid::data

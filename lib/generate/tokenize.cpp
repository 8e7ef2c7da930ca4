#include "generate/tokenize.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "data/prompts.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

namespace braid::gen {

namespace {

ordered_json describe(const tok::Tokenizer& t, const std::vector<std::int32_t>& ids) {
  ordered_json j;
  j["ids"] = ids;
  ordered_json tokens = ordered_json::array();
  for (auto id : ids) {
    const std::int32_t one[] = {id};
    tokens.push_back(t.decode(one, /*skip_special=*/false));
  }
  j["tokens"] = std::move(tokens);
  j["decoded"] = t.decode(ids, /*skip_special=*/false);
  return j;
}

}  // namespace

std::vector<ordered_json> tokenize(const TokenizeOptions& o) {
  const int inputs = int(o.text.has_value()) + int(!o.prompts.empty()) + int(!o.chat.empty()) + int(!o.ids.empty());
  if (inputs != 1) throw UsageError("give one input: a TEXT, --prompts FILE, --chat FILE or --decode IDS");
  const tok::ChatDefaults run = tok::chat_defaults(o.tools, o.chat_template_kwargs);
  auto t = tok::load_tokenizer(o.tokenizer);
  std::vector<ordered_json> out;
  if (o.text) {
    const auto ids = o.specials ? tok::encode_text(*t, *o.text) : t->encode(*o.text);
    ordered_json j = {{"text", *o.text}};
    j.update(describe(*t, ids));
    out.push_back(std::move(j));
  } else if (!o.ids.empty()) {
    for (auto id : o.ids) {
      if (id < 0 || id >= t->vocab_size()) {
        throw UsageError(fmt::format("--decode: id {} is outside the tokenizer's vocabulary [0, {})", id, t->vocab_size()));
      }
    }
    out.push_back(describe(*t, o.ids));
  } else if (!o.prompts.empty()) {
    const auto lines = data::read_prompts(o.prompts, {.tokenizer = t.get(), .vocab_size = t->vocab_size(),
                                                 .chat_template_from = o.tokenizer, .chat = run});
    for (const auto& p : lines) {
      ordered_json j = {{"line", p.line}, {"id", p.id}};
      j.update(describe(*t, p.tokens));
      out.push_back(std::move(j));
    }
  } else {
    const tok::ChatTemplate chat = tok::ChatTemplate::load(o.tokenizer);
    Checker c(o.chat);
    for_each_jsonl_line(read_text_file(o.chat), 0, [&](std::int64_t line_no, std::string_view line) {
      const std::string where = fmt::format("line {}", line_no);
      if (const auto deep = json_depth_problem(line)) {
        c.fail(where, "is not JSON (" + *deep + ")");
        return;
      }
      try {
        const auto conv = tok::conversation_of_line(ordered_json::parse(line), run);
        const tok::ChatText r = chat.render(conv, o.generation_prompt);
        ordered_json j = {{"line", line_no}, {"text", r.text}};
        j.update(describe(*t, t->encode(r.text)));
        if (chat.has_generation_blocks()) {
          ordered_json spans = ordered_json::array();
          for (const auto& s : r.generation) spans.push_back({s.begin, s.end});
          j["generation"] = std::move(spans);
        }
        if (!o.generation_prompt) {
          const auto learnt = chat.assistant_spans(conv, r, *t);
          ordered_json ranges = ordered_json::array();
          for (const auto& s : learnt) ranges.push_back({s.begin, s.end});
          j["learnt"] = std::move(ranges);
          const tok::LearntEncoding e = tok::encode_learnt(*t, r.text, learnt);
          ordered_json mask = ordered_json::array();
          for (const bool b : e.learnt) mask.push_back(b ? 1 : 0);
          j["loss_mask"] = std::move(mask);
        }
        out.push_back(std::move(j));
      } catch (const ordered_json::parse_error& e) {
        c.fail(where, fmt::format("is not JSON ({})", e.what()));
      } catch (const tok::ChatError& e) {
        c.fail(where + "." + e.field(), e.what());
      }
    });
    c.check();
  }
  return out;
}

}  // namespace braid::gen

// SFT and preference lines become token sequences as Hugging Face would tokenize them:
// prompt and completion encoded as one text (no stray SentencePiece "▁" at the
// boundary), and conversations rendered by the model's chat template.
#define BOOST_TEST_MODULE data_text_examples
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "tokenizer/tokenizer.hpp"
#include "data/text_examples.hpp"

#include "../common/scratch.hpp"
#include "tests/common/input_error.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <string>
#include <vector>

using namespace braid;
using Ids = std::vector<std::int32_t>;

namespace {

std::string fixture(const std::string& path) { return std::string(std::getenv("BRAID_FIXTURES")) + "/" + path; }

std::string write(const std::string& name, const std::string& text) {
  const auto file = test::scratch(name);
  write_text_file(file.string(), text);
  return file.string();
}

Ids seq(const io::SampleBatch& b, std::size_t i) {
  const auto s = b.sequence(i);
  return Ids(s.begin(), s.end());
}

}  // namespace

// llama2_style: <s> 1, </s> 2, ▁ 259, ▁hello 271, ▁world 276.
BOOST_AUTO_TEST_CASE(sentencepiece_sft_has_no_stray_metaspace_at_the_boundary) {
  const auto tok = tok::load_tokenizer(fixture("tokenizer/llama2_style"));
  const auto b = data::read_sft_jsonl(write("sp.jsonl", R"({"prompt": "hello", "response": " world"})" "\n"), *tok,
                                       tok->vocab_size(), 64);
  BOOST_TEST(seq(b, 0) == (Ids{1, 271, 276, 2}), boost::test_tools::per_element());
  BOOST_TEST(b.prompt_len[0] == 2);
  // What encoding the two apart gave: <s> ▁hello ▁ ▁world </s>, a ▁ the model would learn to emit.
  BOOST_TEST(tok->encode(" world").front() == 259);
  const auto p = data::read_preference_jsonl(
      write("sp-pairs.jsonl", R"({"prompt": "hello w", "chosen": "orld", "rejected": " hello"})" "\n"), *tok,
      tok->vocab_size(), 64);
  BOOST_TEST(seq(p, 0) == (Ids{1, 271, 276, 2}), boost::test_tools::per_element());
  BOOST_TEST(p.prompt_len[0] == 2);  // ▁world covers "orld": it is the completion's
  BOOST_TEST(seq(p, 1) == (Ids{1, 271, 272, 271, 2}), boost::test_tools::per_element());
  BOOST_TEST(p.prompt_len[1] == 3);  // "hello w" ends with ▁w, all prompt
}

// gpt2_style: hello 259, Ġwor 262, ld 263, Ġworld 264, <|endoftext|> 268 (its EOS; no BOS).
BOOST_AUTO_TEST_CASE(byte_level_sft_boundary_is_that_of_the_whole_text) {
  const auto tok = tok::load_tokenizer(fixture("tokenizer/gpt2_style"));
  const auto b = data::read_sft_jsonl(write("bl.jsonl", R"({"prompt": "hello wor", "response": "ld"})" "\n"), *tok,
                                       tok->vocab_size(), 64);
  BOOST_TEST(seq(b, 0) == (Ids{259, 264, 268}), boost::test_tools::per_element());
  BOOST_TEST(b.prompt_len[0] == 1);
}

BOOST_AUTO_TEST_CASE(sft_conversations_learn_the_assistant_turn) {
  const std::string dir = fixture("chat/llama3");
  const auto tok = tok::load_tokenizer(dir);
  const json line = json::parse(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})");
  const auto b = data::read_sft_jsonl(write("chat.jsonl", line.dump() + "\n"), *tok, tok->vocab_size(), 256, dir);
  // Jinja's rendering of the whole conversation, from the fixture; no BOS or EOS added to it.
  std::string whole;
  for (const auto& c : load_json_file(dir + "/renderings.json")) {
    if (c["messages"] == line["messages"] && c["add_generation_prompt"] == false) whole = c["text"];
  }
  BOOST_TEST_REQUIRE(!whole.empty());
  BOOST_TEST(seq(b, 0) == tok->encode(whole), boost::test_tools::per_element());
  // The prompt is the conversation up to the assistant header; the answer and its <|eot_id|> are learnt.
  const std::string prompt = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n";
  BOOST_TEST_REQUIRE(whole.starts_with(prompt));
  BOOST_TEST(b.prompt_len[0] == static_cast<std::int32_t>(tok->encode(prompt).size()));
  BOOST_TEST(seq(b, 0).back() == tok->encode("<|eot_id|>").front());
  BOOST_TEST_REQUIRE(b.loss_mask.has_value());
  for (std::size_t t = 0; t < b.length(0); ++t) BOOST_TEST((*b.loss_mask)[t] == (t >= std::size_t(b.prompt_len[0]) ? 1.0f : 0.0f));
}

// Every assistant turn of a conversation is learnt, and nothing else: the mask holds
// exactly the bytes of each turn's answer and end of turn as the real models' templates
// write them (the byte tokenizer: token k is byte k of the rendering). Qwen3 drops the
// thinking of turns before the last user turn and, with thinking off, opens its
// generation prompt with an empty <think></think> that earlier turns do not have.
BOOST_AUTO_TEST_CASE(every_assistant_turn_is_learnt_as_the_template_renders_it) {
  const auto byte = tok::load_tokenizer("byte");
  const json plain = json::parse(R"([
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two, three."},
    {"role": "user", "content": "And back?"}, {"role": "assistant", "content": "Three, two, one."}])");
  json thinking = plain;
  thinking[3]["reasoning_content"] = "They want counting.";
  thinking[5]["reasoning_content"] = "Reverse it.";
  struct Case {
    const char* model;
    json messages, kwargs;
    std::vector<std::string> learnt;  // in order, each found in the rendering after the one before
  };
  const std::vector<Case> cases = {
      {"llama-3.1-instruct", plain, json::object(),
       {"Hello! How can I help?<|eot_id|>", "One, two, three.<|eot_id|>", "Three, two, one.<|eot_id|>"}},
      {"gemma-3", plain, json::object(),
       {"Hello! How can I help?<end_of_turn>\n", "One, two, three.<end_of_turn>\n", "Three, two, one.<end_of_turn>\n"}},
      {"qwen3", thinking, json::object(),
       {"Hello! How can I help?<|im_end|>\n", "One, two, three.<|im_end|>\n",
        "<think>\nReverse it.\n</think>\n\nThree, two, one.<|im_end|>\n"}},
      {"qwen3", plain, json{{"enable_thinking", false}},
       {"Hello! How can I help?<|im_end|>\n", "One, two, three.<|im_end|>\n", "Three, two, one.<|im_end|>\n"}},
  };
  for (const Case& c : cases) {
    const std::string dir = fixture("chat/models/" + std::string(c.model));
    const json line = {{"messages", c.messages}, {"chat_template_kwargs", c.kwargs}};
    const auto b = data::read_sft_jsonl(write("turns.jsonl", line.dump() + "\n"), *byte, 259, 4096, dir);
    BOOST_TEST_REQUIRE(b.size() == 1u);
    BOOST_TEST_REQUIRE(b.loss_mask.has_value());
    const auto ids = seq(b, 0);
    const std::string text = byte->decode(ids, false);
    BOOST_TEST_REQUIRE(text.size() == ids.size());
    std::vector<float> want(text.size(), 0.0f);
    std::size_t from = 0;
    for (const std::string& l : c.learnt) {
      const std::size_t at = text.find(l, from);
      BOOST_TEST_REQUIRE(at != std::string::npos, c.model << ": no '" << l << "' in " << text);
      std::fill(want.begin() + std::ptrdiff_t(at), want.begin() + std::ptrdiff_t(at + l.size()), 1.0f);
      from = at + l.size();
    }
    const std::vector<float> got(b.loss_mask->begin(), b.loss_mask->end());
    BOOST_TEST(got == want, boost::test_tools::per_element());
    BOOST_TEST(std::size_t(b.prompt_len[0]) == text.find(c.learnt.front()), c.model);
    // The earlier turns' thinking is not in the rendering (and so not learnt).
    BOOST_TEST(text.find("They want counting.") == std::string::npos, c.model);
  }
}

// Every real model's fixture conversation with an assistant turn (with tools, tool round
// trips, thinking on and off) is learnt: each assistant answer lies inside a learnt
// stretch of the rendering.
BOOST_AUTO_TEST_CASE(the_real_templates_learn_every_assistant_answer) {
  const auto byte = tok::load_tokenizer("byte");
  int checked = 0;
  for (const char* model : {"deepseek-r1-distill", "gemma-3", "llama-3.1-instruct", "llama-3.2-instruct",
                            "mistral-7b-instruct-v0.3", "phi-4", "qwen2.5-instruct", "qwen3", "smollm3"}) {
    const std::string dir = fixture("chat/models/" + std::string(model));
    for (const auto& c : load_json_file(dir + "/renderings.json")) {
      if (c["add_generation_prompt"] == true || !c.contains("text")) continue;
      std::vector<std::string> answers;
      for (const auto& m : c["messages"]) {
        if (m["role"] != "assistant") continue;
        answers.emplace_back();
        if (!m.contains("content") || !m["content"].is_string()) continue;
        std::string a = m["content"];
        if (auto at = a.rfind("</think>"); at != std::string::npos) a = a.substr(at + 8);
        // Without the white space a template trims (Python's str.strip: Unicode's too).
        auto space_at = [&](std::size_t i) -> std::size_t {
          for (const std::string_view w : {" ", "\t", "\n", "\r", "\u3000", "\u00a0"}) {
            if (a.compare(i, w.size(), w) == 0) return w.size();
          }
          return 0;
        };
        while (!a.empty() && space_at(0) > 0) a.erase(0, space_at(0));
        for (bool trimmed = true; trimmed && !a.empty();) {
          trimmed = false;
          for (std::size_t k = 1; k <= 3 && k <= a.size(); ++k) {
            if (space_at(a.size() - k) == k) {
              a.erase(a.size() - k);
              trimmed = true;
              break;
            }
          }
        }
        answers.back() = a;
      }
      if (answers.empty()) continue;
      json line = {{"messages", c["messages"]}};
      if (c.contains("tools")) line["tools"] = c["tools"];
      if (c.contains("kwargs")) line["chat_template_kwargs"] = c["kwargs"];
      const std::string what = std::string(model) + " " + c["case"].get<std::string>();
      io::SampleBatch b;
      try {
        b = data::read_sft_jsonl(write("real.jsonl", line.dump() + "\n"), *byte, 259, 1 << 16, dir);
      } catch (const InputError& e) {
        // An opening assistant turn has no header where the template renders no empty conversation.
        const bool opening = c["messages"][0]["role"] == "assistant" &&
                             std::string(e.what()).find("line 1.messages[0]: the chat template") != std::string::npos &&
                             std::string(e.what()).find("renders no conversation before") != std::string::npos;
        BOOST_TEST(opening, what << ": " << e.what());
        continue;
      }
      BOOST_TEST_REQUIRE(b.loss_mask.has_value(), what);
      std::vector<std::string> learnt(1);
      for (std::size_t t = 0; t < b.token_count(); ++t) {
        if ((*b.loss_mask)[t] != 0.0f) {
          learnt.back() += static_cast<char>(b.tokens[t]);
        } else if (!learnt.back().empty()) {
          learnt.emplace_back();
        }
      }
      for (const std::string& a : answers) {
        const bool found = std::any_of(learnt.begin(), learnt.end(), [&](const std::string& l) {
          return l.find(a) != std::string::npos;
        });
        BOOST_TEST(found, what << ": '" << a << "' is not learnt");
      }
      BOOST_TEST(b.prompt_len[0] > 0, what);
      ++checked;
    }
  }
  BOOST_TEST(checked >= 50);
}

// A line's tools and keyword arguments win over the run's; keyword arguments merge key by key.
BOOST_AUTO_TEST_CASE(run_tools_and_template_kwargs_serve_lines_without_their_own) {
  const auto byte = tok::load_tokenizer("byte");
  const std::string dir = fixture("chat/models/qwen3");
  const json messages = json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}])");
  const json tool = json::parse(R"({"type": "function", "function": {"name": "clock", "parameters": {}}})");
  const json own_tool = json::parse(R"({"type": "function", "function": {"name": "own_tool", "parameters": {}}})");
  const std::string file =
      write("run-chat.jsonl", json{{"messages", messages}}.dump() + "\n" +
                                  json{{"messages", messages}, {"tools", json::array({own_tool})},
                                       {"chat_template_kwargs", {{"enable_thinking", true}}}}.dump() + "\n");
  tok::ChatDefaults run;
  run.tools = ordered_json::array({ordered_json(tool)});
  run.kwargs = {{"enable_thinking", false}};
  const auto b = data::read_sft_jsonl(file, *byte, 259, 4096, dir, run);
  BOOST_TEST_REQUIRE(b.size() == 2u);
  const std::string first = byte->decode(seq(b, 0), false), second = byte->decode(seq(b, 1), false);
  BOOST_TEST(first.find("\"clock\"") != std::string::npos, first);
  BOOST_TEST(second.find("own_tool") != std::string::npos, second);
  BOOST_TEST(second.find("clock") == std::string::npos, second);
  // Thinking off (the run's): the generation prompt holds the empty thinking, which is not
  // learnt; on (the line's): the model writes it, and learns it.
  auto learnt = [&](std::size_t i) {
    std::string out;
    for (std::size_t t = b.begin(i); t < b.end(i); ++t) {
      if ((*b.loss_mask)[t] != 0.0f) out += static_cast<char>(b.tokens[t]);
    }
    return out;
  };
  BOOST_TEST(learnt(0) == "Hello.<|im_end|>\n");
  BOOST_TEST(learnt(1) == "<think>\n\n</think>\n\nHello.<|im_end|>\n");
  // Preference pairs take the run's defaults too.
  const std::string pairs = write("run-pairs.jsonl", json{{"prompt", messages}, {"chosen", "A"}, {"rejected", "B"}}.dump() + "\n");
  const auto p = data::read_preference_jsonl(pairs, *byte, 259, 4096, dir, run);
  BOOST_TEST(byte->decode(seq(p, 0), false).find("\"clock\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_conversations_name_line_and_field) {
  const std::string dir = fixture("chat/mistral-system-folded");
  const auto tok = tok::load_tokenizer(dir);
  const std::string file = write("bad-chat.jsonl",
                                 R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})" "\n"
                                 R"({"messages": [{"role": "user", "content": "Q"}]})" "\n"
                                 R"({"messages": [{"role": "user", "content": "Q"}, {"role": "bot", "content": "A"}]})" "\n"
                                 R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})" "\n"
                                 R"({"messages": []})" "\n");
  const std::string what = braid::test::refusal([&] { data::read_sft_jsonl(file, *tok, tok->vocab_size(), 256, dir); });
  BOOST_TEST(what.find("line 2.messages: has no assistant turn to learn") != std::string::npos, what);
  BOOST_TEST(what.find("line 3.messages: Only user and assistant roles are supported") != std::string::npos, what);
  BOOST_TEST(what.find("line 5.messages: is empty") != std::string::npos, what);
  // Mistral folds the system turn into the last user turn; its assistant turn is still found.
  BOOST_TEST(what.find("line 4") == std::string::npos, what);
  BOOST_TEST(what.find("line 1") == std::string::npos, what);
  // The byte tokenizer has no template.
  const auto byte = tok::load_tokenizer("byte");
  try {
    data::read_sft_jsonl(write("byte-chat.jsonl", R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})" "\n"),
                          *byte, 259, 256, "byte");
    BOOST_FAIL("a conversation was accepted without a chat template");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("line 1.messages") != std::string::npos, e.what());
  }
}

// TRL's conversational preference form: the prompt a list of messages, each completion
// the assistant's answer (a string or messages), rendered by the chat template.
BOOST_AUTO_TEST_CASE(preference_pairs_may_be_conversations) {
  const std::string dir = fixture("chat/qwen2");
  const auto tok = tok::load_tokenizer(dir);
  const std::string file = write("chat-pairs.jsonl",
      R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": "A", "rejected": [{"role": "assistant", "content": "hello"}]})" "\n");
  const auto b = data::read_preference_jsonl(file, *tok, tok->vocab_size(), 256, dir);
  BOOST_TEST_REQUIRE(b.size() == 2u);
  // Jinja's rendering of [user Q, assistant A] from the fixture; the prompt is [user Q] with the generation prompt.
  std::string whole;
  const json qa = json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}])");
  for (const auto& c : load_json_file(dir + "/renderings.json")) {
    if (c["messages"] == qa && c["add_generation_prompt"] == false) whole = c["text"];
  }
  BOOST_TEST_REQUIRE(!whole.empty());
  BOOST_TEST(seq(b, 0) == tok->encode(whole), boost::test_tools::per_element());
  const std::string prompt = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                             "<|im_start|>assistant\n";
  BOOST_TEST(b.prompt_len[0] == static_cast<std::int32_t>(tok->encode(prompt).size()));
  BOOST_TEST(b.prompt_len[1] == b.prompt_len[0]);
  BOOST_TEST(seq(b, 1) == tok->encode(prompt + "hello<|im_end|>\n"), boost::test_tools::per_element());

  const std::string bad = write("bad-chat-pairs.jsonl",
      R"({"prompt": [{"role": "user"}], "chosen": "A", "rejected": "B"})" "\n"
      R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "user", "content": "A"}], "rejected": "B"})" "\n"
      R"({"prompt": "Q", "chosen": [{"role": "assistant", "content": "A"}], "rejected": "B"})" "\n");
  const std::string what = braid::test::refusal([&] { data::read_preference_jsonl(bad, *tok, tok->vocab_size(), 256, dir); });
  BOOST_TEST(what.find("line 1.prompt[0].content: is missing") != std::string::npos, what);
  BOOST_TEST(what.find("line 2.chosen: must end with the assistant's message") != std::string::npos, what);
  BOOST_TEST(what.find("line 3.chosen: must be a string when the prompt is") != std::string::npos, what);
}

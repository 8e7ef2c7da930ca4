// SFT and preference lines become token sequences as Hugging Face would tokenize them:
// prompt and completion encoded as one text (no stray SentencePiece "▁" at the
// boundary), and conversations rendered by the model's chat template.
#define BOOST_TEST_MODULE train_text_inputs
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/train_inputs.hpp"

#include "../common/scratch.hpp"

#include <cstdlib>
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
  const auto b = train::read_sft_jsonl(write("sp.jsonl", R"({"prompt": "hello", "response": " world"})" "\n"), *tok,
                                       tok->vocab_size(), 64);
  BOOST_TEST(seq(b, 0) == (Ids{1, 271, 276, 2}), boost::test_tools::per_element());
  BOOST_TEST(b.prompt_len[0] == 2);
  // What encoding the two apart gave: <s> ▁hello ▁ ▁world </s>, a ▁ the model would learn to emit.
  BOOST_TEST(tok->encode(" world").front() == 259);
  const auto p = train::read_preference_jsonl(
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
  const auto b = train::read_sft_jsonl(write("bl.jsonl", R"({"prompt": "hello wor", "response": "ld"})" "\n"), *tok,
                                       tok->vocab_size(), 64);
  BOOST_TEST(seq(b, 0) == (Ids{259, 264, 268}), boost::test_tools::per_element());
  BOOST_TEST(b.prompt_len[0] == 1);
}

BOOST_AUTO_TEST_CASE(sft_conversations_learn_the_last_assistant_turn) {
  const std::string dir = fixture("chat/llama3");
  const auto tok = tok::load_tokenizer(dir);
  const json line = json::parse(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})");
  const auto b = train::read_sft_jsonl(write("chat.jsonl", line.dump() + "\n"), *tok, tok->vocab_size(), 256, dir);
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
  try {
    train::read_sft_jsonl(file, *tok, tok->vocab_size(), 256, dir);
    BOOST_FAIL("bad conversations were accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("line 2.messages[0].role: the last message must be the assistant's") != std::string::npos, what);
    BOOST_TEST(what.find("line 3.messages[1].role") != std::string::npos, what);
    // Mistral folds the system turn into the last user turn: no prefix split exists.
    BOOST_TEST(what.find("line 4.messages: the chat template") != std::string::npos, what);
    BOOST_TEST(what.find("line 5.messages: is empty") != std::string::npos, what);
    BOOST_TEST(what.find("line 1") == std::string::npos, what);
  }
  // The byte tokenizer has no template.
  const auto byte = tok::load_tokenizer("byte");
  try {
    train::read_sft_jsonl(write("byte-chat.jsonl", R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})" "\n"),
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
  const auto b = train::read_preference_jsonl(file, *tok, tok->vocab_size(), 256, dir);
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
  try {
    train::read_preference_jsonl(bad, *tok, tok->vocab_size(), 256, dir);
    BOOST_FAIL("bad conversational pairs were accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("line 1.prompt[0].content: is missing") != std::string::npos, what);
    BOOST_TEST(what.find("line 2.chosen: must end with the assistant's message") != std::string::npos, what);
    BOOST_TEST(what.find("line 3.chosen: must be a string when the prompt is") != std::string::npos, what);
  }
}

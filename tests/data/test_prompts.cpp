#define BOOST_TEST_MODULE data_prompts
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "data/prompts.hpp"
#include "tokenizer/tokenizer.hpp"

#include "../common/scratch.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

using braid::data::parse_prompts;
using braid::data::PromptFileOptions;

namespace {

struct Fixture {
  std::unique_ptr<braid::tok::Tokenizer> tok = braid::tok::load_tokenizer("byte");
  PromptFileOptions opt{.tokenizer = tok.get(), .vocab_size = 259, .max_tokens = 16};
};

// The message of the InputError that parsing `text` throws ("" when none).
std::string error_of(const std::string& text, const PromptFileOptions& opt) {
  try {
    parse_prompts(text, "p.jsonl", opt);
  } catch (const braid::InputError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_FIXTURE_TEST_CASE(text_gets_a_bos_tokens_are_taken_as_they_are, Fixture) {
  const auto ps = parse_prompts("{\"text\": \"Hi\"}\n\n  \n{\"tokens\": [1, 258], \"id\": \"q7\"}\r\n{\"text\":\"x\",\"id\":3}",
                                "p.jsonl", opt);
  BOOST_TEST_REQUIRE(ps.size() == 3u);
  BOOST_TEST(ps[0].tokens == (std::vector<std::int32_t>{256, 'H', 'i'}), boost::test_tools::per_element());
  BOOST_TEST(ps[0].line == 1);
  BOOST_TEST(ps[1].tokens == (std::vector<std::int32_t>{1, 258}), boost::test_tools::per_element());
  BOOST_TEST(ps[1].id == "q7");
  BOOST_TEST(ps[1].line == 4);  // blank lines count as lines, not as prompts
  BOOST_TEST(ps[2].id == "3");
  BOOST_TEST(ps[2].line == 5);
}

BOOST_FIXTURE_TEST_CASE(limit_reads_only_the_first_prompts, Fixture) {
  opt.limit = 2;
  // Line 3 is bad, but past the limit: not read.
  const auto ps = parse_prompts("{\"text\":\"a\"}\n{\"text\":\"b\"}\n{oops\n", "p.jsonl", opt);
  BOOST_TEST(ps.size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_lone_bad_line_is_named_file_colon_line_and_field, Fixture) {
  BOOST_TEST(error_of("{\"text\":\"a\"}\n{\"tokens\": [1, 300]}\n", opt) ==
             "p.jsonl:2: tokens[1]: 300 is outside the model's vocabulary [0, 259)");
  BOOST_TEST(has(error_of("{\"text\":\"a\"}\n{\"text\": \"a\",\n", opt), "p.jsonl:2: not valid JSON"));
  BOOST_TEST(error_of("{\"text\": \"\"}", opt) == "p.jsonl:1: text: is empty");
  BOOST_TEST(has(error_of("{\"tokens\": []}", opt), "p.jsonl:1: tokens: is empty"));
  BOOST_TEST(has(error_of("{\"tokens\": [1, 2.5]}", opt), "p.jsonl:1: tokens[1]: must be an integer"));
  BOOST_TEST(error_of("{\"txt\": \"a\"}", opt) ==
             "p.jsonl:1: has none of \"prompt\", \"text\", \"tokens\" and \"messages\" (give one; its keys: txt)");
  BOOST_TEST(error_of("{\"text\": \"a\", \"tokens\": [1]}", opt) ==
             "p.jsonl:1: has \"text\" and \"tokens\" (give one)");
  BOOST_TEST(error_of("{\"prompt\": \"a\", \"text\": \"b\"}", opt) ==
             "p.jsonl:1: has \"prompt\" and \"text\" (give one)");
  BOOST_TEST(has(error_of("[1, 2]", opt), "p.jsonl:1: expected a JSON object"));
  BOOST_TEST(has(error_of("{\"text\": \"a\", \"id\": [1]}", opt), "p.jsonl:1: id: must be a string or an integer"));
  BOOST_TEST(has(error_of("{\"text\": \"fifteen letters\"}", opt), "p.jsonl:1: text: has 16 tokens"));
  BOOST_TEST(has(error_of("\n\n", opt), "has no prompts"));
}

BOOST_FIXTURE_TEST_CASE(every_bad_line_is_listed, Fixture) {
  const std::string e = error_of("{\"text\":\"a\"}\nnope\n{\"text\":\"b\"}\n{\"tokens\":[-1]}\n{\"text\":5}\n", opt);
  BOOST_TEST(has(e, "p.jsonl: 3 problems"));
  BOOST_TEST(has(e, "p.jsonl:2: not valid JSON"));
  BOOST_TEST(has(e, "p.jsonl:4: tokens[0]: -1 is outside"));
  BOOST_TEST(has(e, "p.jsonl:5: text: must be a string"));
}

BOOST_FIXTURE_TEST_CASE(text_encoding_past_the_model_vocabulary_is_refused, Fixture) {
  opt.vocab_size = 100;  // 'x' is 120
  // The byte tokenizer's BOS (256), which tokenizer(text) puts in front, is past it.
  BOOST_TEST(has(error_of("{\"text\": \"x\"}", opt), "p.jsonl:1: text: encodes to id 256, outside the model's vocabulary"));
}

BOOST_FIXTURE_TEST_CASE(prompt_is_text_and_every_other_key_is_an_extra_field, Fixture) {
  const auto ps = parse_prompts(
      "{\"prompt\": \"Hi\", \"answer\": 42, \"id\": \"q1\"}\n"
      "{\"tokens\": [1], \"answer\": \"\\\\frac{1}{2}\", \"meta\": {\"level\": 3, \"tags\": [\"a\"]}}\n"
      "{\"text\": \"x\"}\n",
      "p.jsonl", opt);
  BOOST_TEST_REQUIRE(ps.size() == 3u);
  BOOST_TEST(ps[0].tokens == (std::vector<std::int32_t>{256, 'H', 'i'}), boost::test_tools::per_element());
  BOOST_TEST(ps[0].id == "q1");
  BOOST_TEST(braid::json::parse(ps[0].extra) == braid::json::parse(R"({"answer": 42, "id": "q1"})"));
  BOOST_TEST(braid::json::parse(ps[1].extra) ==
             braid::json::parse(R"({"answer": "\\frac{1}{2}", "meta": {"level": 3, "tags": ["a"]}})"));
  BOOST_TEST(ps[2].extra == "{}");
}

BOOST_FIXTURE_TEST_CASE(a_prompt_field_names_itself_in_messages, Fixture) {
  BOOST_TEST(error_of("{\"prompt\": \"\"}", opt) == "p.jsonl:1: prompt: is empty");
  BOOST_TEST(has(error_of("{\"prompt\": 7}", opt), "p.jsonl:1: prompt: must be a string, found number"));
  BOOST_TEST(has(error_of("{\"prompt\": \"fifteen letters\"}", opt), "p.jsonl:1: prompt: has 16 tokens"));
}


namespace {

std::string chat_dir(const std::string& family) {
  return braid::test::fixture("chat/" + family).string();
}

// The first rendering of the family's renderings.json made with the generation prompt
// for exactly these messages.
std::string jinja_rendering(const std::string& family, const braid::json& messages) {
  for (const auto& c : braid::load_json_file(chat_dir(family) + "/renderings.json")) {
    if (c["messages"] == messages && c["add_generation_prompt"] == true && c.contains("text")) return c["text"];
  }
  BOOST_FAIL("no rendering for " << messages.dump());
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(chat_prompts_are_rendered_by_the_models_template) {
  const auto messages = braid::json::parse(
      R"([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 6*7?"}])");
  for (const std::string family : {"llama3", "mistral-system-folded", "qwen2", "gemma"}) {
    BOOST_TEST_CONTEXT(family) {
      const auto tok = braid::tok::load_tokenizer(chat_dir(family));
      const PromptFileOptions opt{.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .max_tokens = 0,
                                  .chat_template_from = chat_dir(family)};
      if (family == "gemma") {  // Gemma has no system turn: the template's refusal, naming line and field
        const std::string e = error_of("{\"text\": \"x\"}\n{\"messages\": " + messages.dump() + "}", opt);
        BOOST_TEST(has(e, "p.jsonl:2: messages: System role not supported"));
        continue;
      }
      const auto ps = parse_prompts("{\"messages\": " + messages.dump() + ", \"answer\": 42, \"id\": \"c1\"}", "p.jsonl", opt);
      BOOST_TEST_REQUIRE(ps.size() == 1u);
      const std::string text = jinja_rendering(family, messages);
      // Encoded as it is: the template's BOS text becomes the BOS id, and none is added.
      BOOST_TEST(ps[0].tokens == tok->encode(text), boost::test_tools::per_element());
      if (tok->bos() && family != "qwen2") {
        BOOST_TEST(ps[0].tokens.front() == *tok->bos());
        BOOST_TEST(ps[0].tokens[1] != *tok->bos());
      }
      BOOST_TEST(ps[0].extra == R"({"answer":42,"id":"c1"})");
      BOOST_TEST(ps[0].id == "c1");
    }
  }
  // Llama 3's markers are one id each.
  const auto tok = braid::tok::load_tokenizer(chat_dir("llama3"));
  const auto ps = parse_prompts(R"({"messages": [{"role": "user", "content": "hi"}]})", "p.jsonl",
                                {.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .chat_template_from = chat_dir("llama3")});
  const auto header = tok->encode("<|start_header_id|>");
  BOOST_TEST_REQUIRE(header.size() == 1u);
  BOOST_TEST(std::count(ps[0].tokens.begin(), ps[0].tokens.end(), header[0]) == 2);
}

BOOST_AUTO_TEST_CASE(bad_chat_prompts_name_file_line_and_field) {
  const auto tok = braid::tok::load_tokenizer(chat_dir("mistral"));
  const PromptFileOptions opt{.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .max_tokens = 0,
                              .chat_template_from = chat_dir("mistral")};
  const std::string e = error_of(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
      "{\"messages\": [{\"role\": \"user\"}]}\n"
      "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}\n"
      "{\"messages\": \"hello\"}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"prompt\": \"b\"}\n",
      opt);
  BOOST_TEST(has(e, "p.jsonl:2: messages[0].content: is missing"));
  // Roles are the template's to judge, as in transformers: this one wants user first.
  BOOST_TEST(has(e, "p.jsonl:3: messages: Conversation roles must alternate"));
  BOOST_TEST(has(e, "p.jsonl:4: messages: Conversation roles must alternate"));
  BOOST_TEST(has(e, "p.jsonl:5: messages: must be an array"));
  BOOST_TEST(has(e, "p.jsonl:6"));
  BOOST_TEST(!has(e, "p.jsonl:1"));
  // The byte tokenizer has no template: the line says so.
  const auto byte = braid::tok::load_tokenizer("byte");
  const std::string b = error_of("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}",
                                 {.tokenizer = byte.get(), .vocab_size = 259, .chat_template_from = "byte"});
  BOOST_TEST(has(b, "p.jsonl:1"));
  BOOST_TEST(has(b, "the byte tokenizer has none"));
  // A template that does not parse: that file is named, with the line and column; one that
  // fails on a line's conversation: the line is named, and the place in the template.
  const std::string scratch = braid::test::scratch("odd_template").string();
  std::filesystem::create_directories(scratch);
  std::filesystem::copy_file(chat_dir("mistral") + "/tokenizer.json", scratch + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  braid::json cfg = braid::load_json_file(chat_dir("mistral") + "/tokenizer_config.json");
  cfg["chat_template"] = "{% for m in messages %}\n{{ m['content'] }\n{% endfor %}";
  std::ofstream(scratch + "/tokenizer_config.json") << cfg.dump();
  const PromptFileOptions odd{.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .chat_template_from = scratch};
  try {
    parse_prompts("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "p.jsonl", odd);
    BOOST_ERROR("a template that does not parse was accepted");
  } catch (const braid::InputError& err) {
    BOOST_TEST(has(err.file(), "tokenizer_config.json"));
    BOOST_TEST(err.field() == "chat_template");
    BOOST_TEST(has(err.what(), "(chat_template):2:"));
  }
  cfg["chat_template"] = "{% for m in messages %}{{ m['content'] + custom_var }}{% endfor %}";
  std::ofstream(scratch + "/tokenizer_config.json", std::ios::trunc) << cfg.dump();
  const std::string r = error_of("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", odd);
  BOOST_TEST(has(r, "p.jsonl:1: messages:"));
  BOOST_TEST(has(r, "(chat_template):1:"));
  BOOST_TEST(has(r, "'custom_var' is undefined"));
}

// Prompt lines of real models' tokenizers (tests/fixtures/tokenizer/real), read as
// braid-generate reads them: text gets what transformers' tokenizer(text) adds, and no
// more; a conversation gets nothing added.
BOOST_AUTO_TEST_CASE(prompt_lines_start_as_transformers_starts_them) {
  const std::string real = std::string(std::getenv("BRAID_FIXTURES")) + "/tokenizer/real/";
  const std::vector<std::pair<std::string, std::optional<std::int32_t>>> first = {
      {"qwen3", std::nullopt}, {"llama3.2", 128000}, {"gemma3", 2}, {"llama2", 1}};
  for (const auto& [name, bos] : first) {
    BOOST_TEST_CONTEXT(name) {
      const auto tok = braid::tok::load_tokenizer(real + name);
      const PromptFileOptions opt{.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .chat_template_from = real + name};
      const auto ps = parse_prompts("{\"prompt\": \"hi\"}", "p.jsonl", opt);
      std::vector<std::int32_t> want = tok->encode("hi");
      if (bos) want.insert(want.begin(), *bos);
      BOOST_TEST(ps[0].tokens == want, boost::test_tools::per_element());
      // Qwen's ordinary "<s>" (128245) is never put in front.
      BOOST_TEST(ps[0].tokens.front() != 128245);
    }
  }
}

BOOST_AUTO_TEST_CASE(tools_and_template_keyword_arguments_per_line_and_per_run) {
  const std::string qwen3 = braid::test::fixture("tokenizer/real/qwen3").string();
  const std::string scratch = braid::test::scratch("tools.json").string();
  std::ofstream(scratch) << R"([{"type": "function", "function": {"name": "zeta", "description": "z", "parameters": {}}}])";
  const auto tok = braid::tok::load_tokenizer(qwen3);
  PromptFileOptions opt{.tokenizer = tok.get(), .vocab_size = tok->vocab_size(), .chat_template_from = qwen3,
                        .chat = braid::tok::chat_defaults(scratch, R"({"enable_thinking": false})")};
  const auto ps = parse_prompts(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"chat_template_kwargs\": {\"enable_thinking\": true}, "
      "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"alpha\", \"parameters\": {}}}], \"answer\": 1}\n",
      "p.jsonl", opt);
  const std::string run = tok->decode(ps[0].tokens, false), own = tok->decode(ps[1].tokens, false);
  // The run's tools and its enable_thinking=false (an empty think block opens the answer).
  BOOST_TEST(has(run, "{\"type\": \"function\", \"function\": {\"name\": \"zeta\", \"description\": \"z\", \"parameters\": {}}}"));
  BOOST_TEST(run.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), run);
  // A line's own tools and keyword arguments win; they are not extra fields.
  BOOST_TEST(has(own, "\"name\": \"alpha\""));
  BOOST_TEST(!has(own, "zeta"));
  BOOST_TEST(own.ends_with("<|im_start|>assistant\n"), own);
  BOOST_TEST(ps[1].extra == R"({"answer":1})");
  BOOST_CHECK_THROW(braid::tok::chat_defaults("", "[1]"), braid::UsageError);
}

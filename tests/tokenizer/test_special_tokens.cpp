// BOS, EOS and the tokens put around a text, decided as transformers decides them, on
// real models' tokenizers (tests/fixtures/tokenizer/make_real_fixtures.py): never a
// token found by searching the vocabulary for a usual name.
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

using braid::InputError;
using braid::json;
using braid::ordered_json;
using Ids = std::vector<braid::tok::TokenId>;

namespace {

std::string real(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/tokenizer/real/" + name; }

braid::tok::Conversation hello() {
  return braid::tok::conversation_of(ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), ordered_json(),
                                     ordered_json());
}

}  // namespace

BOOST_AUTO_TEST_CASE(qwen3_has_no_bos_though_its_vocabulary_has_an_ordinary_s_token) {
  auto t = braid::tok::load_tokenizer(real("qwen3"));
  // "<s>" is an ordinary token of Qwen's vocabulary (id 128245): not a BOS.
  BOOST_TEST(!t->bos().has_value());
  BOOST_TEST(t->specials_before().empty());
  BOOST_TEST(t->specials_after().empty());
  BOOST_TEST(*t->eos() == 151645);  // <|im_end|>
  const Ids ids = braid::tok::encode_text(*t, "hi");
  BOOST_TEST(ids == t->encode("hi"), boost::test_tools::per_element());
  BOOST_TEST((std::find(ids.begin(), ids.end(), 128245) == ids.end()));
  // A conversation starts with <|im_start|>, as apply_chat_template gives it.
  const auto chat = braid::tok::ChatTemplate::load(real("qwen3"));
  const Ids conv = t->encode(chat.render(hello(), true).text);
  BOOST_TEST(conv.front() == 151644);
}

BOOST_AUTO_TEST_CASE(llama3_takes_bos_from_the_post_processor) {
  auto t = braid::tok::load_tokenizer(real("llama3.2"));
  BOOST_TEST(t->specials_before() == (Ids{128000}), boost::test_tools::per_element());
  BOOST_TEST(t->specials_after().empty());
  BOOST_TEST(*t->bos() == 128000);
  BOOST_TEST(*t->eos() == 128009);  // <|eot_id|>, the Instruct model's end of turn
  // The template writes <|begin_of_text|> itself: once, at the start.
  const auto chat = braid::tok::ChatTemplate::load(real("llama3.2"));
  const Ids conv = t->encode(chat.render(hello(), true).text);
  BOOST_TEST(conv.front() == 128000);
  BOOST_TEST(std::count(conv.begin(), conv.end(), 128000) == 1);
}

BOOST_AUTO_TEST_CASE(gemma_and_llama2_take_bos_from_add_bos_token) {
  auto g = braid::tok::load_tokenizer(real("gemma3"));
  BOOST_TEST(g->specials_before() == (Ids{2}), boost::test_tools::per_element());  // <bos>
  BOOST_TEST(*g->eos() == 106);                                                   // <end_of_turn>
  auto l = braid::tok::load_tokenizer(real("llama2"));
  BOOST_TEST(l->specials_before() == (Ids{1}), boost::test_tools::per_element());  // <s>
  BOOST_TEST(l->specials_after().empty());
  BOOST_TEST(*l->eos() == 2);
}

BOOST_AUTO_TEST_CASE(llama_classes_rebuild_the_post_processor_from_the_config) {
  const json doc = braid::load_json_file(real("llama2") + "/tokenizer.json");
  json cfg = braid::load_json_file(real("llama2") + "/tokenizer_config.json");
  auto with = [&](const json& c) {
    braid::tok::HfTokenizer t(doc, "tokenizer.json");
    t.read_config(c, "tokenizer_config.json");
    return std::pair{t.specials_before(), t.specials_after()};
  };
  cfg["add_bos_token"] = false;
  cfg["add_eos_token"] = true;
  BOOST_TEST(with(cfg).first.empty());
  BOOST_TEST(with(cfg).second == (Ids{2}), boost::test_tools::per_element());
  // The defaults of the class: a BOS, no EOS.
  cfg.erase("add_bos_token");
  cfg.erase("add_eos_token");
  BOOST_TEST(with(cfg).first == (Ids{1}), boost::test_tools::per_element());
  // Another class keeps the tokenizer.json's post-processor whatever add_bos_token says.
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  cfg["add_bos_token"] = false;
  BOOST_TEST(with(cfg).first == (Ids{1}), boost::test_tools::per_element());
  // A null bos_token with add_bos_token, and a token the tokenizer does not have, are refused.
  cfg["tokenizer_class"] = "LlamaTokenizer";
  cfg["add_bos_token"] = true;
  cfg["bos_token"] = nullptr;
  try {
    with(cfg);
    BOOST_ERROR("accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.field()) == "bos_token");
  }
  cfg["bos_token"] = "<nope>";
  try {
    with(cfg);
    BOOST_ERROR("accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.field()) == "bos_token");
  }
}

BOOST_AUTO_TEST_CASE(without_a_config_there_are_no_special_tokens_to_guess) {
  // A bare tokenizer.json whose vocabulary has "<s>" and "</s>": no BOS, no EOS.
  const json doc = braid::load_json_file(real("qwen3") + "/tokenizer.json");
  braid::tok::HfTokenizer t(doc, "tokenizer.json");
  BOOST_TEST(!t.bos().has_value());
  BOOST_TEST(!t.eos().has_value());
  BOOST_TEST(!t.pad().has_value());
}

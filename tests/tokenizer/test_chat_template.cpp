// braid's chat-template renderers against renderings made by Jinja itself from the
// templates the models ship (tests/fixtures/chat/make_renderings.py).
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/chat_template_known.hpp"

#include <cstdlib>
#include <string>

using braid::InputError;
using braid::json;
using braid::tok::ChatError;
using braid::tok::ChatTemplate;

namespace {

std::string chat_fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/chat/" + name; }

std::string error_of(const json& cfg) {
  try {
    ChatTemplate::from_config(cfg, "tc.json");
  } catch (const InputError& e) {
    return std::string(e.field()) + " | " + e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_family_renders_as_jinja_does) {
  for (const std::string family : {"llama3", "mistral", "mistral-system-folded", "chatml", "qwen2", "gemma"}) {
    const std::string dir = chat_fixture(family);
    const ChatTemplate t = ChatTemplate::load(dir);
    BOOST_TEST(t.name() == family);
    const json cases = braid::load_json_file(dir + "/renderings.json");
    BOOST_TEST_REQUIRE(cases.size() >= 20u);
    int rendered = 0, refused = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const json& c = cases[i];
      BOOST_TEST_CONTEXT(family << " case " << i << ": " << c["messages"].dump()) {
        const auto messages = braid::tok::chat_messages_of(c["messages"]);
        if (c.contains("text")) {
          BOOST_TEST(t.render(messages, c["add_generation_prompt"].get<bool>()) == c["text"].get<std::string>());
          ++rendered;
        } else {
          try {
            t.render(messages, c["add_generation_prompt"].get<bool>());
            BOOST_ERROR("rendered a conversation the template refuses: " << c["error"]);
          } catch (const ChatError& e) {
            BOOST_TEST(std::string(e.what()) == c["error"].get<std::string>());
            BOOST_TEST(e.field().starts_with("messages["));
          }
          ++refused;
        }
      }
    }
    BOOST_TEST(rendered >= 10);
    if (family == "mistral" || family == "mistral-system-folded" || family == "gemma") BOOST_TEST(refused >= 2);
  }
}

BOOST_AUTO_TEST_CASE(recognition_ignores_what_jinja_does_not_print) {
  // The Llama 3 template written over several lines with trimmed tags, "\n" as a newline
  // inside its literals and a comment: the same template to Jinja, so the same family.
  json cfg = braid::load_json_file(chat_fixture("llama3/tokenizer_config.json"));
  cfg["chat_template"] =
      "{#- Llama 3 -#}\n{% set loop_messages = messages %}\n{%- for message in loop_messages -%}\n"
      "  {%- set content = \"<|start_header_id|>\" + message['role'] + '<|end_header_id|>\n\n' + message['content'] | "
      "trim + '<|eot_id|>' -%}\n"
      "  {%- if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif -%}\n"
      "  {{- content -}}\n{%- endfor -%}\n"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  BOOST_TEST(ChatTemplate::from_config(cfg, "tc.json").name() == "llama3");
  // Text Jinja would print between tags makes it another template.
  cfg["chat_template"] = cfg["chat_template"].get<std::string>() + " ";
  BOOST_TEST(error_of(cfg).starts_with("chat_template | "));
}

BOOST_AUTO_TEST_CASE(unknown_templates_and_missing_tokens_are_refused) {
  json cfg = braid::load_json_file(chat_fixture("gemma/tokenizer_config.json"));
  const std::string gemma = cfg["chat_template"];
  // A changed literal: a different template, refused with the supported list.
  cfg["chat_template"] = std::string(gemma).replace(gemma.find("'model'"), 7, "'bot'");
  const std::string e = error_of(cfg);
  BOOST_TEST(e.find("chat_template | ") == 0u);
  BOOST_TEST(e.find("tc.json") != std::string::npos);
  for (const char* name : {"llama3", "mistral", "chatml", "qwen2", "gemma"}) BOOST_TEST(e.find(name) != std::string::npos);
  cfg["chat_template"] = "{% for m in messages %}{{ m.content ";
  BOOST_TEST(error_of(cfg).find("not a readable Jinja template") != std::string::npos);
  cfg.erase("chat_template");
  BOOST_TEST(error_of(cfg).starts_with("chat_template | "));
  // The template writes bos_token: a config without one cannot be rendered.
  cfg["chat_template"] = gemma;
  cfg.erase("bos_token");
  BOOST_TEST(error_of(cfg).starts_with("bos_token | "));
  // Named templates: the "default" one is taken.
  cfg["bos_token"] = {{"content", "<bos>"}};
  cfg["chat_template"] = json::array({{{"name", "tool_use"}, {"template", "x"}}, {{"name", "default"}, {"template", gemma}}});
  BOOST_TEST(ChatTemplate::from_config(cfg, "tc.json").name() == "gemma");
}

BOOST_AUTO_TEST_CASE(bad_messages_name_the_field) {
  auto field_of = [](const std::string& text) {
    try {
      braid::tok::chat_messages_of(json::parse(text));
    } catch (const ChatError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  BOOST_TEST(field_of(R"([{"role": "user", "content": "hi"}])") == "(accepted)");
  BOOST_TEST(field_of(R"([])") == "messages");
  BOOST_TEST(field_of(R"({"role": "user"})") == "messages");
  BOOST_TEST(field_of(R"([{"role": "user", "content": "hi"}, {"content": "x"}])") == "messages[1].role");
  BOOST_TEST(field_of(R"([{"role": "user"}])") == "messages[0].content");
  BOOST_TEST(field_of(R"([{"role": "tool", "content": "x"}])") == "messages[0].role");
  BOOST_TEST(field_of(R"([{"role": "user", "content": [{"type": "text"}]}])") == "messages[0].content");
  BOOST_TEST(field_of(R"([{"role": "user", "content": "x", "name": "bob"}])") == "messages[0].name");
  BOOST_TEST(field_of(R"([3])") == "messages[0]");
}

BOOST_AUTO_TEST_CASE(byte_tokenizer_has_no_chat_template) {
  BOOST_CHECK_THROW(ChatTemplate::load("byte"), braid::UsageError);
  BOOST_CHECK_THROW(ChatTemplate::load(std::string(std::getenv("BRAID_FIXTURES")) + "/tokenizer/gpt2_style"), InputError);
}

// Real models' chat templates rendered by braid against the renderings of Python's
// jinja2 in transformers' environment (tests/fixtures/chat/make_model_renderings.py):
// byte for byte, the same refusals, the same {% generation %} spans.
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "tokenizer/chat_template.hpp"

#include <ctime>
#include <fstream>
#include <filesystem>
#include <map>
#include <string>

using braid::InputError;
using braid::json;
using braid::ordered_json;
using braid::tok::ChatError;
using braid::tok::ChatTemplate;

namespace {

std::string fixtures() { return std::string(std::getenv("BRAID_FIXTURES")) + "/chat"; }

// The time the reference renderings' strftime_now formatted: 2025-02-14 09:30 local.
std::time_t reference_now() {
  std::tm tm{};
  tm.tm_year = 125;
  tm.tm_mon = 1;
  tm.tm_mday = 14;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

ordered_json load_ordered(const std::string& path) {
  std::ifstream in(path);
  return ordered_json::parse(in);
}

struct Counts {
  int rendered = 0, refused = 0;
};

// Renders every entry of renderings.json with the template of dir's tokenizer_config.json.
Counts check_renderings(const std::string& dir) {
  ChatTemplate t = ChatTemplate::load(dir);
  t.options().now = reference_now;
  const ordered_json cases = load_ordered(dir + "/renderings.json");
  Counts n;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ordered_json& c = cases[i];
    BOOST_TEST_CONTEXT(dir << " entry " << i << " (" << c.value("case", "") << ", add_generation_prompt "
                           << c["add_generation_prompt"] << ")") {
      const auto conv = braid::tok::conversation_of(c["messages"], c.value("tools", ordered_json()),
                                                    c.value("kwargs", ordered_json()));
      const bool gen = c["add_generation_prompt"].get<bool>();
      if (c.contains("text")) {
        braid::tok::ChatText r;
        try {
          r = t.render(conv, gen);
        } catch (const ChatError& e) {
          BOOST_ERROR("refused: " << e.what());
          continue;
        }
        BOOST_TEST(r.text == c["text"].get<std::string>());
        if (c.contains("generation")) {
          std::vector<std::pair<std::size_t, std::size_t>> got, want;
          for (const auto& s : r.generation) got.emplace_back(s.begin, s.end);
          for (const auto& s : c["generation"]) want.emplace_back(s[0].get<std::size_t>(), s[1].get<std::size_t>());
          BOOST_TEST(got == want);
        }
        ++n.rendered;
      } else {
        try {
          t.render(conv, gen);
          BOOST_ERROR("rendered a conversation the template refuses: " << c["error"]);
        } catch (const ChatError& e) {
          BOOST_TEST(std::string(e.what()) == c["error"].get<std::string>());
        }
        ++n.refused;
      }
    }
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(real_models_render_as_transformers_does) {
  // The models the issue names, each with single and multi-turn conversations with and
  // without the generation prompt, tools where the template takes them and thinking on
  // and off where it has the switch.
  const std::map<std::string, int> least = {
      {"llama-3.1-instruct", 20}, {"llama-3.2-instruct", 20}, {"qwen2.5-instruct", 18}, {"qwen3", 26},
      {"gemma-3", 10},            {"deepseek-r1-distill", 18}, {"mistral-7b-instruct-v0.3", 14},
      {"phi-4", 16},              {"smollm3", 26}};
  for (const auto& [model, n] : least) {
    const Counts c = check_renderings(fixtures() + "/models/" + model);
    BOOST_TEST(c.rendered >= n, model << ": " << c.rendered << " renderings");
  }
  // Refusals are the template's own: Gemma and Mistral insist on alternating roles,
  // Llama 3.x on one tool call at a time.
  BOOST_TEST(check_renderings(fixtures() + "/models/gemma-3").refused >= 4);
  BOOST_TEST(check_renderings(fixtures() + "/models/mistral-7b-instruct-v0.3").refused >= 4);
  BOOST_TEST(check_renderings(fixtures() + "/models/llama-3.2-instruct").refused >= 2);
}

BOOST_AUTO_TEST_CASE(older_family_templates_render_as_transformers_does) {
  for (const std::string family : {"llama3", "mistral", "mistral-system-folded", "chatml", "qwen2", "gemma"}) {
    const Counts c = check_renderings(fixtures() + "/" + family);
    BOOST_TEST(c.rendered >= 10);
  }
}

BOOST_AUTO_TEST_CASE(a_template_that_does_not_parse_names_file_line_and_column) {
  json cfg = {{"chat_template", "{% for m in messages %}\n{{ m.content }\n{% endfor %}"}};
  try {
    ChatTemplate::from_config(cfg, "tc.json");
    BOOST_ERROR("parsed");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.field()) == "chat_template");
    BOOST_TEST(std::string(e.what()).find("tc.json (chat_template):2:") != std::string::npos, e.what());
  }
  // No template at all, a list without a default one.
  BOOST_CHECK_THROW(ChatTemplate::from_config(json{{"bos_token", "<s>"}}, "tc.json"), InputError);
  BOOST_CHECK_THROW(ChatTemplate::from_config(json{{"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}}})}}, "tc.json"),
                    InputError);
  // A named list's default template is the one used.
  json named = {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D{{ bos_token }}"}}})},
                {"bos_token", "<s>"}};
  braid::tok::Conversation conv = braid::tok::conversation_of(ordered_json::parse(R"([{"role": "user", "content": "x"}])"),
                                                              ordered_json(), ordered_json());
  BOOST_TEST(ChatTemplate::from_config(named, "tc.json").render(conv, false).text == "D<s>");
}

BOOST_AUTO_TEST_CASE(template_errors_on_a_conversation_name_the_place) {
  // A template meeting a value it cannot use says where in the template.
  json cfg = {{"chat_template", "{{ messages[0].content + 1 }}"}};
  const auto t = ChatTemplate::from_config(cfg, "tc.json");
  const auto conv = braid::tok::conversation_of(ordered_json::parse(R"([{"role": "user", "content": "x"}])"), ordered_json(),
                                                ordered_json());
  try {
    t.render(conv, true);
    BOOST_ERROR("rendered");
  } catch (const ChatError& e) {
    BOOST_TEST(std::string(e.what()).find("tc.json (chat_template):1:") != std::string::npos, e.what());
    BOOST_TEST(std::string(e.what()).find("can only concatenate str") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(conversations_are_checked_before_rendering) {
  auto field_of = [](const char* messages, const char* tools = "null", const char* kwargs = "null") {
    try {
      braid::tok::conversation_of(ordered_json::parse(messages), ordered_json::parse(tools), ordered_json::parse(kwargs));
    } catch (const ChatError& e) {
      return e.field();
    }
    return std::string();
  };
  BOOST_TEST(field_of("[]") == "messages");
  BOOST_TEST(field_of(R"([{"content": "x"}])") == "messages[0].role");
  BOOST_TEST(field_of(R"([{"role": "user"}])") == "messages[0].content");
  BOOST_TEST(field_of(R"([{"role": "user", "content": 3}])") == "messages[0].content");
  BOOST_TEST(field_of(R"([{"role": "assistant", "tool_calls": {}}])") == "messages[0].tool_calls");
  BOOST_TEST(field_of(R"([{"role": "user", "content": "x"}])", "{}") == "tools");
  BOOST_TEST(field_of(R"([{"role": "user", "content": "x"}])", "null", "[]") == "chat_template_kwargs");
  BOOST_TEST(field_of(R"([{"role": "user", "content": "x"}])", "null", R"({"messages": 1})") == "chat_template_kwargs.messages");
  // Tool calls without content, tool results, any role: the template decides.
  BOOST_TEST(field_of(R"([{"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "1"}, {"role": "ipython", "content": "x"}])")
                 .empty());
}

#define BOOST_TEST_MODULE jinja
// braid's Jinja engine against Python's jinja2 on small templates covering the language
// (tests/fixtures/jinja/make_cases.py), errors with their place, and hostile templates
// held by the limits.
#include <boost/test/unit_test.hpp>

#include "jinja/template.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

using braid::jinja::Error;
using braid::jinja::Template;
using braid::jinja::Value;

namespace {

nlohmann::ordered_json cases() {
  std::ifstream in(std::string(std::getenv("BRAID_FIXTURES")) + "/jinja/cases.json");
  return nlohmann::ordered_json::parse(in);
}

std::string render(const std::string& source, const Value& vars = Value::dict(), braid::jinja::Limits limits = {}) {
  braid::jinja::RenderOptions o;
  o.limits = limits;
  return Template::parse(source, "t.jinja", limits).render(vars, o).text;
}

// The error a template gives, or "" when it renders.
Error::Kind error_kind(const std::string& source, braid::jinja::Limits limits = {}) {
  try {
    render(source, Value::dict(), limits);
  } catch (const Error& e) {
    return e.kind();
  }
  BOOST_ERROR("rendered: " << source);
  return Error::syntax;
}

}  // namespace

BOOST_AUTO_TEST_CASE(renders_as_jinja2_does) {
  const auto all = cases();
  BOOST_TEST_REQUIRE(all.size() >= 80u);
  int rendered = 0, refused = 0;
  for (const auto& c : all) {
    const std::string source = c["template"].get<std::string>();
    BOOST_TEST_CONTEXT(source) {
      const Value vars = Value::from_json(c["vars"]);
      if (c.contains("text")) {
        try {
          BOOST_TEST(render(source, vars) == c["text"].get<std::string>());
        } catch (const Error& e) {
          BOOST_ERROR("failed: " << e.what());
        }
        ++rendered;
      } else {
        try {
          render(source, vars);
          BOOST_ERROR("rendered what jinja2 refuses: " << c["error"]);
        } catch (const Error& e) {
          // raise_exception's message is the template's own.
          if (c["error"].get<std::string>().starts_with("TemplateError: ")) {
            BOOST_TEST(e.kind() == Error::raised);
            BOOST_TEST(e.message() == c["error"].get<std::string>().substr(15));
          }
        }
        ++refused;
      }
    }
  }
  BOOST_TEST(rendered >= 70);
  BOOST_TEST(refused >= 15);
}

BOOST_AUTO_TEST_CASE(errors_name_file_line_column_and_construct) {
  try {
    render("line one\n{% for m in messages %}\n  {{ m.content + 1 }}\n{% endfor %}",
           Value::from_json(nlohmann::json::parse(R"({"messages": [{"content": "x"}]})")));
    BOOST_ERROR("rendered");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == Error::runtime);
    BOOST_TEST(e.origin() == "t.jinja");
    BOOST_TEST(e.line() == 3);
    BOOST_TEST(e.column() == 16);  // the '+'
    BOOST_TEST(e.construct() == "'+'");
    BOOST_TEST(std::string(e.what()).starts_with("t.jinja:3:16: can only concatenate str (not \"int\") to str"), e.what());
  }
  try {
    Template::parse("ok\n\n  {% if x %}\n", "chat.jinja");
    BOOST_ERROR("parsed");
  } catch (const Error& e) {
    BOOST_TEST(e.kind() == Error::syntax);
    BOOST_TEST(std::string(e.what()).find("chat.jinja:") == 0);
    BOOST_TEST(std::string(e.what()).find("endif") != std::string::npos, e.what());
  }
  try {
    Template::parse("{{ a |\n nosuch }}", "f");
    BOOST_ERROR("parsed");
  } catch (const Error& e) {
    BOOST_TEST(e.line() == 1);
    BOOST_TEST(std::string(e.what()).find("No filter named 'nosuch'") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(generation_blocks_give_their_spans) {
  Template t = Template::parse("a{% generation %}bé{% endgeneration %}c{% generation %}{% endgeneration %}", "g");
  BOOST_TEST(t.has_generation());
  const auto r = t.render(Value::dict());
  BOOST_TEST(r.text == "abéc");
  BOOST_TEST_REQUIRE(r.generation.size() == 2u);
  BOOST_TEST(r.generation[0].begin == 1u);
  BOOST_TEST(r.generation[0].end == 4u);  // bytes: "b" and the two of "é"
  BOOST_TEST(r.generation[1].begin == 5u);
  BOOST_TEST(r.generation[1].end == 5u);
  BOOST_TEST(!Template::parse("{{ 'generation' }}", "g").has_generation());
}

BOOST_AUTO_TEST_CASE(strftime_now_formats_the_given_time) {
  braid::jinja::RenderOptions o;
  o.now = [] { return std::time_t(0); };
  const auto r = Template::parse("{{ strftime_now('%Y') | length }}", "t").render(Value::dict(), o);
  BOOST_TEST(r.text == "4");
}

BOOST_AUTO_TEST_CASE(hostile_templates_are_stopped_by_the_limits) {
  braid::jinja::Limits small;
  small.max_output = 1 << 16;
  small.max_steps = 200'000;
  small.max_depth = 32;
  small.max_items = 10'000;
  // Endless work: nested loops over the largest range the sandbox allows.
  BOOST_TEST(error_kind("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", small) == Error::limit);
  // Output, and strings and lists built in one go.
  BOOST_TEST(error_kind("{% for a in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}", small) == Error::limit);
  BOOST_TEST(error_kind("{{ 'x' * 1000000000 }}", small) == Error::limit);
  BOOST_TEST(error_kind("{{ ([1] * 100000000)|length }}", small) == Error::limit);
  BOOST_TEST(error_kind("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small) ==
             Error::limit);
  // Recursion through macros, and values nested through a namespace.
  BOOST_TEST(error_kind("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", small) == Error::limit);
  BOOST_TEST(error_kind("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}", small) ==
             Error::limit);
  BOOST_TEST(error_kind("{% set ns = namespace() %}{% set ns.me = [ns] %}", small) == Error::runtime);
  // Deep nesting in the source itself.
  BOOST_TEST(error_kind("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", small) == Error::syntax);
  BOOST_TEST(error_kind("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}", small) == Error::syntax);
  BOOST_TEST(error_kind("{{ x" + std::string(5000, '|') + " }}", small) == Error::syntax);
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  BOOST_TEST(error_kind(ifs, small) == Error::syntax);
  // Integers past 64 bits are refused rather than wrapped.
  BOOST_TEST(error_kind("{{ 2 ** 64 }}", small) == Error::runtime);
  BOOST_TEST(error_kind("{{ 9223372036854775807 + 1 }}", small) == Error::runtime);
}

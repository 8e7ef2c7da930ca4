// The Jinja engine (lib/jinja): the fuzzer's bytes are a chat template, parsed and rendered
// with a conversation, tools and a keyword argument, under limits small enough that a
// template that would run away stops quickly. Its errors (jinja::Error: syntax, runtime,
// raise_exception, a limit passed) are the expected outcome; a crash, a sanitizer report, a
// leak or a hang is not.
#include "fuzz/fuzz_common.hpp"
#include "jinja/template.hpp"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const braid::jinja::Value vars = braid::jinja::Value::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Zürich? 😀"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
                 {"role": "tool", "content": "{\"t\": 21}"}, {"role": "assistant", "content": "<think>x</think>21"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
               "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "documents": null, "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"})"));
  braid::jinja::Limits limits;
  limits.max_output = 1 << 20;
  limits.max_items = 1 << 16;
  limits.max_steps = 200'000;
  limits.max_depth = 64;
  braid::jinja::RenderOptions options;
  options.limits = limits;
  options.now = [] { return std::time_t(1739525400); };
  try {
    const auto t = braid::jinja::Template::parse(braid::fuzz::as_text(data, size), "fuzz", limits);
    (void)t.render(vars, options);
  } catch (const braid::jinja::Error&) {
  }
  return 0;
}

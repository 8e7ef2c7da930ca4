#include "core/made_from.hpp"

#include <xxhash.h>

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

namespace braid {
namespace {

// The parts of a record the fingerprint covers, in a canonical order (json sorts keys).
json canonical(const ordered_json& m) {
  // A text key, "" when absent or of another type (a record's output may be null).
  const auto text = [&](const char* key) {
    const auto it = m.find(key);
    return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  json c;
  c["tool"] = text("tool");
  c["output"] = text("output");
  c["options"] = json::parse(m.value("options", ordered_json::object()).dump());
  json inputs = json::object();
  const ordered_json given = m.value("inputs", ordered_json::object());
  for (const auto& [role, in] : given.items()) {
    if (!in.is_array()) {
      inputs[role] = json::parse(in.dump());
      continue;
    }
    json digests = json::array();
    for (const auto& f : in) digests.push_back(f.is_object() ? json(f.value("digest", "")) : json(f.dump()));
    inputs[role] = std::move(digests);
  }
  c["inputs"] = std::move(inputs);
  return c;
}

bool all_strings(const ordered_json& v) {
  return std::all_of(v.begin(), v.end(), [](const ordered_json& x) { return x.is_string(); });
}

// An input as MadeFrom writes it: a value, or files each with its digest.
bool is_input(const ordered_json& in) {
  if (in.is_string()) return true;
  return in.is_array() && std::all_of(in.begin(), in.end(), [](const ordered_json& f) {
           return f.is_object() && f.value("file", ordered_json()).is_string() &&
                  f.value("digest", ordered_json()).is_string();
         });
}

bool is_record(const ordered_json& doc) {
  const auto field = [&](const char* key) { return doc.is_object() ? doc.value(key, ordered_json()) : ordered_json(); };
  const ordered_json inputs = field("inputs"), options = field("options"), given = field("given");
  return doc.is_object() && field("tool").is_string() && options.is_object() && all_strings(options) &&
         inputs.is_object() && std::all_of(inputs.begin(), inputs.end(), is_input) &&
         (given.is_null() || (given.is_array() && all_strings(given))) &&
         (field("output").is_null() || field("output").is_string());
}

constexpr const char* kNotARecord =
    "is not a record of what made the file (an object with tool, options and inputs: docs/formats.md, \"What made "
    "a file\")";

}  // namespace

std::string xxh3_text(std::string_view text) {
  return fmt::format("xxh3-64:{:016x}", XXH3_64bits(text.data(), text.size()));
}

std::string fingerprint_of(const ordered_json& made_from) {
  // A record with an input read from stdin matches nothing: its content is not known.
  const ordered_json inputs = made_from.value("inputs", ordered_json::object());
  for (const auto& [role, in] : inputs.items()) {
    if (in == ordered_json(kMadeFromStdin)) return "unknown (an input came from standard input)";
  }
  return xxh3_text(canonical(made_from).dump());
}

std::optional<ordered_json> parse_made_from(const std::string& text, const std::string& origin) {
  if (text.empty()) return std::nullopt;
  // nlohmann's parser recurses: a record nested 100,000 deep would overflow the stack.
  ordered_json doc = json_depth_problem(text) ? ordered_json() : ordered_json::parse(text, nullptr, false);
  if (!is_record(doc)) throw InputError(origin, "made_from", kNotARecord);
  return doc;
}

std::optional<std::string> made_from_problem(const ordered_json& record) {
  if (!is_record(record)) return std::string(kNotARecord);
  const ordered_json written = record.value("fingerprint", ordered_json());
  const std::string now = fingerprint_of(record);
  if (!written.is_string() || written.get<std::string>() != now) {
    return fmt::format("fingerprint: is {}, but its tool, output, options and inputs give {} (the record was changed "
                       "after it was written)",
                       written.dump(), now);
  }
  return std::nullopt;
}

}  // namespace braid

// The record of what made a file in its JSON form, as any reader needs it without reading
// the files it names: its fingerprint and its checks. io::MadeFrom (io/fingerprint.hpp) makes
// records, digesting the inputs; HDF5 files keep one as their `made_from` attribute, the
// planner's JSON outputs (plans, schedules, profiles) under their `made_from` key.
// docs/formats.md, "What made a file".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.hpp"

namespace braid {

// An input read from standard input: its content is not known, so no record holding one
// equals another.
inline constexpr const char* kMadeFromStdin = "<stdin>";

// "xxh3-64:<16 hex digits>" of `text`.
std::string xxh3_text(std::string_view text);

// The fingerprint of a record: XXH3-64 over its tool, output, options and the inputs' digests
// (not their paths: a moved input is the same input), in a canonical order.
std::string fingerprint_of(const ordered_json& made_from);

// A record read back from a file (an attribute's text, a JSON key): the object, or nullopt
// when `text` is empty; InputError naming `origin` and `made_from` when it is not such a
// record (an object with tool, options and inputs of their types).
std::optional<ordered_json> parse_made_from(const std::string& text, const std::string& origin);

// What is wrong with a record as a reader of a JSON output finds it, or nullopt: not such a
// record, or its fingerprint is not the one its tool, output, options and inputs give (a
// record changed after it was written: an option deleted or rewritten).
std::optional<std::string> made_from_problem(const ordered_json& record);

}  // namespace braid

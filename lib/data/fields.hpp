// A field map: which keys of a prompt file's lines hold what braid reads as the prompt,
// the answer and the messages of a conversation, so that a dataset is used as it comes
// (a GSM8K line {"question", "answer": "... #### 72"}, a MATH line {"problem", "solution":
// "... \boxed{\frac{1}{2}}"}) instead of being rewritten first.
//
//   {"prompt": "question"}  → {"question": "Q", "answer": "A"} reads as {"prompt": "Q", "answer": "A"}
//   {"prompt": "problem", "answer": "solution"} → {"prompt": ..., "answer": ...} (MATH)
//
// A mapped key's value moves to its braid name; every other key stays (an extra field).
#pragma once

#include "core/json.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::data {

// The braid names a file's keys can be mapped to.
inline constexpr const char* kMappedFields[] = {"prompt", "answer", "messages"};

struct FieldMap {
  std::map<std::string, std::string> source;  // braid name -> the file's key
  bool empty() const { return source.empty(); }
  // "prompt=question, answer=solution" for messages.
  std::string describe() const;
};

// "prompt=question" into the map; a problem (unknown braid name, no "=", an empty key, a
// name given twice) as text, nullopt when it is fine.
std::optional<std::string> add_field(FieldMap& map, std::string_view item);

// The line with the map applied. Problems ("question: is missing (the prompt's key)",
// "prompt: the line has both ...") go to `problems`, each starting with the field.
json map_fields(const json& line, const FieldMap& map, std::vector<std::string>& problems);

// Every line of a JSON Lines text (blank lines skipped), mapped, as the text of one JSON
// object each. InputError listing every bad line as ORIGIN:LINE: FIELD: PROBLEM.
std::vector<std::string> map_lines(std::string_view text, const std::string& origin, const FieldMap& map);

}  // namespace braid::data

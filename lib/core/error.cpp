#include "core/error.hpp"

#include <utility>

namespace braid {
namespace {

std::string join_location(const std::string& file, const std::string& field) {
  if (file.empty()) return field;
  if (field.empty()) return file;
  return file + ": " + field;
}

std::string format_problems(const std::string& file, const std::vector<std::string>& problems) {
  std::string out = file + ": " + std::to_string(problems.size()) +
                    (problems.size() == 1 ? " problem" : " problems");
  for (const auto& p : problems) out += "\n  " + p;
  return out;
}

}  // namespace

InputError::InputError(std::string file, std::string field, std::string problem)
    : std::runtime_error(join_location(file, field) + ": " + problem),
      file_(std::move(file)),
      field_(std::move(field)),
      problems_{problem} {}

InputError::InputError(std::string file, std::vector<std::string> problems)
    : std::runtime_error(problems.size() == 1 ? file + ": " + problems.front()
                                              : format_problems(file, problems)),
      file_(std::move(file)),
      problems_(std::move(problems)) {}

}  // namespace braid

// Errors braid raises, and what a tool's exit code makes of them.
//
//   InputError  – the user's input is wrong (a file, a field, a flag): exit 2.
//                 Names the file, the field and what was expected.
//   UsageError  – the command line is wrong in a way CLI11 cannot see: exit 2.
//   anything else (std::exception) is a bug or an environment failure: exit 1.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace braid {

class InputError : public std::runtime_error {
 public:
  // file: the path as the user gave it ("-" for stdin); field: where in it
  // ("/logprobs/actor", "models[1].stages", "--mem-capacity"); may be empty.
  InputError(std::string file, std::string field, std::string problem);

  // Several problems in one file, reported together (config validation).
  InputError(std::string file, std::vector<std::string> problems);

  const std::string& file() const noexcept { return file_; }
  const std::string& field() const noexcept { return field_; }
  const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::string file_;
  std::string field_;
  std::vector<std::string> problems_;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError(file, field, problem) when cond is false.
inline void require(bool cond, const std::string& file, const std::string& field,
                    const std::string& problem) {
  if (!cond) throw InputError(file, field, problem);
}

}  // namespace braid

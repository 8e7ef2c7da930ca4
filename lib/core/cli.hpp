// The shape every braid tool's main() takes: a CLI11 app, the options all tools
// share, and a catch ladder that turns errors into messages and exit codes.
//
//   int main(int argc, char** argv) {
//     CLI::App app{"what it does", "braid-foo"};
//     Options opt;  ... app.add_option(...) ...
//     return braid::cli::run(app, argc, argv, [&] { return foo::run(opt); });
//   }
//
// Exit codes: 0 success; 2 bad command line (message + "--help" hint) or bad
// input (braid::InputError / UsageError); 1 internal error, out of memory, or a
// failed write of stdout.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"

namespace braid::cli {

// -q/--quiet, -v/--verbose (repeatable), --version. run() adds them if absent.
void add_common_options(CLI::App& app);

// Under mpirun every rank parses the same command line, and only the first prints
// help, the version or a usage error; comm::MpiRuntime tells each process whether
// it is the first (a process without MPI is).
void set_first_process(bool first);

// Parses argv into app, then calls body under the catch ladder; returns the exit code.
// Also installs the signal handler that removes unfinished temp files (core/files.hpp).
int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// The value of every option of `app` (given, else its default as --help shows it), by
// name ("--lr", or a positional's name), as text; numbers written the shortest way that
// reads back the same ("1e-5" and "0.00001" are both "1e-05"); several values joined by
// spaces. The options named in `leave_out` (outputs, inputs recorded by their content,
// settings that do not change a result) and --help are left out. For the record of what
// made an output (io/fingerprint.hpp).
ordered_json option_values(const CLI::App& app, const std::vector<std::string>& leave_out);
// Of those, the ones given on the command line (the others hold their defaults).
std::vector<std::string> options_given(const CLI::App& app, const std::vector<std::string>& leave_out);
// Whether `flag` is among `given` (an options_given list): a tool refuses an option given
// where nothing reads it.
bool was_given(const std::vector<std::string>& given, std::string_view flag);
// One spelling per value, as option_values writes them: "1e-5" -> "1e-05", a flag's "true" -> "1"; other text as it is.
std::string canonical_value(const std::string& text);

// The catch ladder alone (for code that parses by itself). Maps the current
// exception to a message on stderr and an exit code. Call only inside a catch block.
int report_current_exception();

}  // namespace braid::cli

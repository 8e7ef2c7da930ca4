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

// The catch ladder alone (for code that parses by itself). Maps the current
// exception to a message on stderr and an exit code. Call only inside a catch block.
int report_current_exception();

}  // namespace braid::cli

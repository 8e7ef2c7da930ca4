// The `braid` driver's verbs. Each verb lives in its own cmd_<verb>.cpp and
// registers itself with one add_<verb>_command(app, verbs) call in main.cpp:
//
//   void add_init_command(CLI::App& app, Verbs& verbs) {
//     auto* sub = app.add_subcommand("init", "...");
//     auto opt = std::make_shared<InitOptions>();   // outlives this function
//     sub->add_option(...);
//     verbs.add(sub, [opt] { return model::init(*opt); });
//   }
//
// The body returns the exit code; errors are thrown (core/error.hpp) and turned
// into messages and exit codes by braid::cli::run.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <utility>
#include <vector>

namespace braid::driver {

class Verbs {
 public:
  void add(CLI::App* sub, std::function<int()> body) { verbs_.emplace_back(sub, std::move(body)); }
  // Runs the body of the subcommand given on the command line.
  int run() const;

 private:
  std::vector<std::pair<CLI::App*, std::function<int()>>> verbs_;
};

// Whether -v/--verbose was given (before or after the verb).
bool verbose(const CLI::App& app);

void add_inspect_command(CLI::App& app, Verbs& verbs);
void add_check_command(CLI::App& app, Verbs& verbs);
void add_info_command(CLI::App& app, Verbs& verbs);
// Models in and out: cmd_init.cpp, cmd_import.cpp, cmd_export.cpp.
void add_init_command(CLI::App& app, Verbs& verbs);
void add_import_command(CLI::App& app, Verbs& verbs);
void add_export_command(CLI::App& app, Verbs& verbs);
// A checkpoint at another tensor-parallel degree: cmd_reshard.cpp.
void add_reshard_command(CLI::App& app, Verbs& verbs);
// The RL loop: cmd_run.cpp (braid run), cmd_makefile.cpp (braid makefile).
void add_run_command(CLI::App& app, Verbs& verbs);
void add_makefile_command(CLI::App& app, Verbs& verbs);
// A Makefile recipe's claim on its run folder: cmd_run_lock.cpp (braid run-lock).
void add_run_lock_command(CLI::App& app, Verbs& verbs);
// Held-out evaluation and the synthetic task: cmd_eval.cpp (braid eval), cmd_synth.cpp (braid synth).
void add_eval_command(CLI::App& app, Verbs& verbs);
void add_synth_command(CLI::App& app, Verbs& verbs);
// A prompt file made ready for a run (field map, held-out split): cmd_data.cpp (braid data).
void add_data_command(CLI::App& app, Verbs& verbs);
// What a model sees: cmd_tokenize.cpp (braid tokenize).
void add_tokenize_command(CLI::App& app, Verbs& verbs);
// The docs' option tables from the tools' option schemas: cmd_options.cpp (braid options).
void add_options_command(CLI::App& app, Verbs& verbs);

}  // namespace braid::driver

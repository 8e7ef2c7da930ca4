#include "driver/option_schema.hpp"

namespace braid::driver {
namespace {

using cli::field;
using cli::kMaxCount;
using R = RunCommand;
using M = MakefileCommand;
using namespace cli::option_types;

// --iterations: how many the run has, instead of the run file's.
template <typename Opts>
cli::SchemaEntry<Opts> iterations(int Opts::*member, const char* help) {
  return field<Opts>(member, {.flag = "--iterations", .type = integer, .help = help,
                              .bounds = {.min = 1, .max = kMaxCount}, .show_default = false});
}

}  // namespace

const cli::OptionSchema<RunCommand>& run_schema() {
  static const cli::OptionSchema<R> s = {
      field<R>(&R::run_file, {.flag = "run_file", .type = path, .help = "The run file (braid.run JSON)",
                              .required = true, .show_default = false}),
      field<R>(&R::out, {.flag = "-o,--output", .type = path,
                         .help = "Output folder (one iter-NNNN folder per iteration, metrics.jsonl)", .required = true,
                         .show_default = false}),
      iterations<R>(&R::iterations, "Run this many iterations instead of the run file's"),
      field<R>(&R::dry_run, {.flag = "-n,--dry-run", .type = boolean,
                             .help = "Print the commands that would run (one line per step, like make -n) and run nothing",
                             .show_default = false}),
      field<R>(&R::force, {.flag = "--force", .type = boolean,
                           .help = "Train again an iteration made with other options than the run file now gives (and "
                                   "every one after it); without it such a folder is refused, naming the options",
                           .show_default = false}),
  };
  return s;
}

const cli::OptionSchema<MakefileCommand>& makefile_schema() {
  static const cli::OptionSchema<M> s = {
      field<M>(&M::run_file, {.flag = "run_file", .type = path, .help = "The run file (braid.run JSON)",
                              .required = true, .show_default = false}),
      field<M>(&M::dir, {.flag = "-d,--dir", .type = path, .help = "The run's output folder (what braid run takes as -o)",
                         .required = true, .show_default = false}),
      field<M>(&M::out, {.flag = "-o,--output", .type = path, .help = "The Makefile to write ('-': stdout)"}),
      iterations<M>(&M::iterations, "Write this many iterations instead of the run file's"),
  };
  return s;
}

}  // namespace braid::driver

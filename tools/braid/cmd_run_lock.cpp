// braid run-lock DIR --owner PID --fd N: a Makefile recipe's claim on its run folder
// (lib/driver/run_lock.hpp), the first command of every recipe a braid Makefile writes:
// it takes the folder lock shared on the recipe shell's descriptor N (held by the tools
// the shell then starts) and records the make (PID) as the folder's holder; exit 2,
// naming the holder's pid and host, when another driver works there.
#include <memory>

#include "driver/run_lock.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

struct RunLockOptions {
  std::string dir;
  int owner = 0;
  int fd = -1;
};

}  // namespace

void add_run_lock_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<RunLockOptions>();
  auto* sub = app.add_subcommand(
      "run-lock", "For braid Makefiles' recipes: claim the run folder DIR for the make PID (a shared lock on the "
                  "shell's descriptor FD of DIR/.braid-run.lock, and DIR/.braid-run.owner); exit 2 naming the holder "
                  "when another braid run or make works there");
  sub->add_option("dir", o->dir, "The run folder")->required();
  sub->add_option("--owner", o->owner, "The make process the recipe belongs to ($$PPID in a recipe)")
      ->required()
      ->check(CLI::PositiveNumber);
  sub->add_option("--fd", o->fd, "The recipe shell's descriptor open on DIR/.braid-run.lock")
      ->required()
      ->check(CLI::NonNegativeNumber);
  verbs.add(sub, [o] {
    claim_for_recipe(o->dir, owner_of(o->owner, "make"), o->fd);
    return 0;
  });
}

}  // namespace braid::driver

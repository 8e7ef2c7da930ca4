// braid makefile: the run `braid run` would do, written as a Makefile
// (lib/driver/makefile).
#include <memory>
#include <optional>

#include "core/files.hpp"
#include "core/log.hpp"
#include "driver/makefile.hpp"
#include "driver/run_lock.hpp"
#include "driver/run_loop.hpp"
#include "core/shell.hpp"
#include "driver/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

int run_makefile(const MakefileCommand& o) {
  RunSpec spec = load_run_file(o.run_file);
  if (o.iterations > 0) spec.iterations = o.iterations;
  std::vector<std::string> cmd = {"braid", "makefile", o.run_file, "--dir", o.dir, "-o", o.out};
  if (o.iterations > 0) cmd.insert(cmd.end(), {"--iterations", std::to_string(o.iterations)});
  const MakefileOptions opt{.tools = find_tools(), .command_line = shell_line(cmd)};
  try {
    // The rules' command lines depend on the plan: it (and its fused schedule) is made now,
    // in the run folder, which no other driver may be writing.
    const std::optional<RunLock> lock =
        spec.run_plan ? std::optional<RunLock>(std::in_place, o.dir, "braid makefile") : std::nullopt;
    prepare_plan(spec, Layout(o.dir), PlanOptions{.tools = opt.tools, .verbosity = {"-q"}});
  } catch (const StageFailed& e) {
    log::error("{}", e.what());
    return e.exit_code();
  }
  write_text_file(o.out, makefile_text(spec, Layout(o.dir), opt));
  return 0;
}

}  // namespace

void add_makefile_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<MakefileCommand>();
  auto* sub = app.add_subcommand(
      "makefile", "Write the run that `braid run RUN -o DIR` does as a Makefile: one rule per stage and "
                  "iteration on real files, so `make` (or `make -j`) runs it and resumes it");
  cli::add_schema_options(*sub, *o, makefile_schema());
  verbs.add(sub, [o] { return run_makefile(*o); });
}

}  // namespace braid::driver

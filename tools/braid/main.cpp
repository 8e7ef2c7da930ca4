// braid: the driver. Verbs are registered here, one line each (see verbs.hpp).
#include "core/cli.hpp"
#include "verbs.hpp"

int main(int argc, char** argv) {
  CLI::App app{"braid: RLHF training toolkit driver (inspect and check braid files, show the build)", "braid"};
  braid::cli::add_common_options(app);
  app.require_subcommand(1);
  app.fallthrough();  // -q/-v also after the verb: `braid check -v FILE`

  braid::driver::Verbs verbs;
  braid::driver::add_inspect_command(app, verbs);
  braid::driver::add_check_command(app, verbs);
  braid::driver::add_info_command(app, verbs);
  braid::driver::add_init_command(app, verbs);
  braid::driver::add_import_command(app, verbs);
  braid::driver::add_export_command(app, verbs);
  braid::driver::add_reshard_command(app, verbs);
  braid::driver::add_run_command(app, verbs);
  braid::driver::add_makefile_command(app, verbs);
  braid::driver::add_run_lock_command(app, verbs);
  braid::driver::add_eval_command(app, verbs);
  braid::driver::add_synth_command(app, verbs);
  braid::driver::add_data_command(app, verbs);
  braid::driver::add_tokenize_command(app, verbs);
  braid::driver::add_options_command(app, verbs);

  return braid::cli::run(app, argc, argv, [&] { return verbs.run(); });
}

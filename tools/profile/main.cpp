// braid-profile: what each piece of a model costs on a device -> profile.json.
//   analytic  from a hardware description (presets h100, h200) and model shapes
//   measure   on this machine, with braid's engine (and links under mpirun)
//   probe     matrix-product and memory throughput of this machine
//   comm      point-to-point and all-reduce between MPI ranks (under mpirun)
// The verbs, their options and their commands: lib/plan/profile_command.hpp.
#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "plan/profile_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Profiles what each piece of a model costs on a device: per decoder layer, embedding and head,\n"
               "forward and backward over micro-batch sizes, decode steps over batch and KV length (BS_max),\n"
               "memory per layer, and the links between devices. Writes braid.profile JSON.",
               "braid-profile"};
  app.require_subcommand(1);
  app.fallthrough();  // -q, -v after the verb
  braid::plan::ProfileOptions o;
  braid::plan::add_profile_verbs(app, o);
  // MPI starts only after parsing: the launcher says which rank prints usage.
  braid::cli::set_first_process(braid::comm::launcher_rank() == 0);
  return braid::cli::run(app, argc, argv, [&] { return braid::plan::run_profile(app, o); });
}

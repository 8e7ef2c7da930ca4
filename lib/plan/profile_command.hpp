// braid-profile's commands: its flags as a plain struct, one function per verb (analytic,
// measure, probe, comm), each writing its JSON to o.output, and each verb's options declared
// once in a schema (core/option_schema.hpp: tools/profile/main.cpp adds them, `braid options
// braid-profile` prints them). docs/tools/profile.md describes the behaviour and
// docs/formats-plan.md the files.
#pragma once

#include "backend/dtype.hpp"

#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/option_schema.hpp"

namespace braid::plan {

struct ProfileModelArgs {
  std::vector<std::string> models;        // HF config.json of models with an LM head
  std::vector<std::string> value_models;  // ... with a value head (critic, reward model)
  std::string experiment;                 // or the four models of a braid.experiment
};

struct ProfileOptions {
  ProfileModelArgs m;
  std::string hardware;             // analytic: h100, h200 or a hardware JSON file
  std::string calibrate;            // analytic: efficiency factors from a measured profile
  std::string output = "profile.json";
  int repeats = 5;
  bool quick = false;
  int threads = 0;
  std::string device = "cpu";       // measure: backend/registry.hpp
  backend::DType dtype = backend::DType::f32;  // measure: the decoder layers' weights
  int max_batch = 0;  // decode batch grid's top; 0: the grid's default
  double comm_max_mb = 64;
  bool host = true;   // measure: also the host costs of a run (plan/host_probe.hpp)
  std::vector<std::string> mpirun = {"mpirun", "--oversubscribe"};  // measure: how MPI jobs are started
  // The verb's options as given (cli::option_values, cli::options_given, the files left out):
  // with the files read, the profile's record of what made it (io/fingerprint.hpp).
  ordered_json option_values = ordered_json::object();
  std::vector<std::string> options_given;
};

// A verb: its name, its line in --help, its options, its command.
struct ProfileVerb {
  std::string name;
  std::string help;
  cli::OptionSchema<ProfileOptions> schema;
  int (*run)(const ProfileOptions&);
};
// analytic, measure, probe, comm.
const std::vector<ProfileVerb>& profile_verbs();
// The verbs as subcommands of app, their options bound to o; and the hidden verbs the
// host costs spawn (plan/host_probe.hpp).
void add_profile_verbs(CLI::App& app, ProfileOptions& o);
// Runs the verb app parsed, o holding its options; o records the verb's option values.
int run_profile(const CLI::App& app, ProfileOptions& o);

// The profile a given hardware would measure (roofline model), as braid.profile.
int run_profile_analytic(const ProfileOptions& o);
// Measured on this machine with braid's engine; under mpirun also the links (rank 0
// writes; MPI starts only when the process was launched by mpirun).
int run_profile_measure(const ProfileOptions& o);
// Matrix-product and memory throughput of this machine, as braid.probe.
int run_profile_probe(const ProfileOptions& o);
// Point-to-point and all-reduce between the ranks of the job, as braid.comm (rank 0
// writes). UsageError (exit 2) on fewer than two ranks.
int run_profile_comm(const ProfileOptions& o);

}  // namespace braid::plan

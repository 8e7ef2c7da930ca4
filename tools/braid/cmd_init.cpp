// braid init: a new model with random weights (seeded), written as weight shards
// (one per pipeline stage); prints the files written, one per line.
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "core/files.hpp"
#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/option_schema.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "core/limits.hpp"
#include "core/log.hpp"
#include "io/fingerprint.hpp"
#include "memory/prediction.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

struct InitOptions : checkpoint::InitCommand {
  ordered_json options = ordered_json::object();   // the record's (io/fingerprint.hpp)
  std::vector<std::string> given;
};

int run_init(const InitOptions& o) {
  if (o.no_lm_head && !o.value_head) throw UsageError("--no-lm-head leaves the model without a head: add --value-head");
  const json doc = load_json_file(o.config);
  const model::ModelConfig cfg = model::parse_config(doc, o.config);
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, o.stages);
  auto be = backend::make_backend(backend::BackendSpec{});
  const std::string cmd = fmt::format("braid init --config {} --seed {} --stages {} --init-std {}{}{} -o {}", o.config,
                                      o.seed, o.stages, o.init_std, o.value_head ? " --value-head" : "",
                                      o.no_lm_head ? " --no-lm-head" : "", o.out);
  io::MadeFrom made_from("braid init");
  made_from.set_options(o.options, o.given);
  made_from.add_input("config", {o.config});
  const std::string record = made_from.to_json().dump();
  for (int s = 0; s < o.stages; ++s) {
    // One stage in memory at a time; the seed gives each tensor the same values whatever the split.
    const model::ModelOptions mopt{.layers = ranges[static_cast<std::size_t>(s)], .lm_head = !o.no_lm_head,
                                   .value_head = o.value_head};
    // A config whose values are each in range can still describe a model no memory holds:
    // refused from its predicted size before anything is allocated.
    const memory::Prediction need = memory::model_bytes({.role = "", .config = cfg, .options = mopt});
    require_host_memory(need.total(), o.config, "",
                        fmt::format("the model{} ({})", o.stages > 1 ? fmt::format(" stage {}", s) : "", need.describe()));
    model::Model m(cfg, mopt, *be);
    m.init_random(o.seed, o.init_std);
    const auto path = checkpoint::stage_path(o.out, s, o.stages);
    checkpoint::save_weights(m, path, {.step = 0, .created_by = cmd, .config_json = doc.dump(), .made_from = record});
    log::info("wrote {} (layers {}..{}, {} parameters)", path.string(), m.layer_begin(), m.layer_end() - 1,
              m.parameter_count());
    std::cout << path_line(path.string()) << '\n';
  }
  return 0;
}

}  // namespace

void add_init_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<InitOptions>();
  auto* sub = app.add_subcommand(
      "init", "Create a Llama model with random weights from a Hugging Face config.json and write it as weight "
              "shards (one per pipeline stage with --stages); prints the files written");
  cli::add_schema_options(*sub, static_cast<checkpoint::InitCommand&>(*o), checkpoint::init_schema());
  verbs.add(sub, [o, sub] {
    o->options = cli::option_values(*sub, {"--config", "-o", "--output", "--stages"});
    o->given = cli::options_given(*sub, {"--config", "-o", "--output", "--stages"});
    return run_init(*o);
  });
}

}  // namespace braid::driver

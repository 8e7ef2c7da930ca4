// --dtype f32|bf16: the storage type of a model's weights, defined once for every tool that
// opens a model (braid-generate, braid-score, braid-train, braid-profile measure). f32 is
// the default; bf16 halves weight memory (compute and gradients stay f32; training keeps an
// f32 master copy in the optimizer).
#pragma once

#include "backend/dtype.hpp"
#include "core/option_schema.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <utility>

namespace braid::backend {

CLI::Option* add_dtype_option(CLI::App& app, DType& dtype);

// --dtype as an entry of a tool's option schema (core/option_schema.hpp), bound to the
// field `get` selects; `doc`: what the tool's docs table says of it.
template <typename Opts, typename Get>
cli::SchemaEntry<Opts> dtype_entry(Get get, std::string doc) {
  return cli::custom<Opts>([get](CLI::App& app, Opts& o, const cli::OptionSpec&) { return add_dtype_option(app, std::invoke(get, o)); },
                           {.flag = "--dtype", .type = cli::OptionType::choice, .choices = {"f32", "bf16"}, .doc = std::move(doc)});
}

}  // namespace braid::backend

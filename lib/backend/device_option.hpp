// The --device option every tool that runs a model takes, defined once.
#pragma once

#include "core/option_schema.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace braid::backend {

// Adds --device to app, bound to `device` (default "cpu"), checked at parse time by
// parse_device() so that a bad value exits 2 naming the option. Whether the device
// can be had here is make_backend()'s question, asked when the tool starts.
CLI::Option* add_device_option(CLI::App& app, std::string& device);

// --device as an entry of a tool's option schema (core/option_schema.hpp), bound to the
// field `get` selects; `doc`: what the tool's docs table says of it.
template <typename Opts, typename Get>
cli::SchemaEntry<Opts> device_entry(Get get, std::string doc) {
  return cli::custom<Opts>([get](CLI::App& app, Opts& o, const cli::OptionSpec&) { return add_device_option(app, std::invoke(get, o)); },
                           {.flag = "--device", .type = cli::OptionType::text, .doc = std::move(doc)});
}

}  // namespace braid::backend

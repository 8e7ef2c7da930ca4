// The --device option every tool that runs a model takes, defined once.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::backend {

// Adds --device to app, bound to `device` (default "cpu"), checked at parse time by
// parse_device() so that a bad value exits 2 naming the option. Whether the device
// can be had here is make_backend()'s question, asked when the tool starts.
CLI::Option* add_device_option(CLI::App& app, std::string& device);

}  // namespace braid::backend

#include "core/cli.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"

#ifndef BRAID_VERSION
#define BRAID_VERSION "0.1.0"
#endif

namespace braid::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

int verbosity = 0;
bool quiet = false;

bool first_process = true;  // set_first_process

int finish_stdout(int code) {
  std::cout.flush();
  bool failed = !std::cout.good();
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) failed = true;
  if (failed) {
    log::error("could not write standard output");
    return code == kExitOk ? kExitInternal : code;
  }
  return code;
}

// CLI11 reports "A subcommand is required" for `tool bogus`; name the word instead.
std::string unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  int first = 1;  // the first word that is not a flag (top-level options are flags only)
  while (first < argc && argv[first][0] == '-') ++first;
  if (subs.empty() || first >= argc) return "";
  const std::string word = argv[first];
  std::string names;
  for (const auto* sub : subs) {
    if (sub->check_name(word)) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return "unknown command '" + word + "' (commands: " + names + ")";
}

// "PATH: cannot create directories: Not a directory" out of libstdc++'s
// "filesystem error: cannot create directories: Not a directory [PATH]".
std::string describe_filesystem_error(const std::filesystem::filesystem_error& e) {
  std::string what = e.what();
  if (what.rfind("filesystem error: ", 0) == 0) what.erase(0, 18);
  if (const auto bracket = what.find(" ["); bracket != std::string::npos) what.erase(bracket);
  std::string where = e.path1().string();
  if (!e.path2().empty()) where += " -> " + e.path2().string();
  return where.empty() ? what : where + ": " + what;
}

}  // namespace

std::string canonical_value(const std::string& text) {
  if (text.empty()) return text;
  if (text == "true") return "1";
  if (text == "false") return "0";
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) return text;
  return fmt::format("{}", v);
}

namespace {

// The options option_values reads, by name.
template <typename Fn>
void for_each_recorded(const CLI::App& app, const std::vector<std::string>& leave_out, Fn&& fn) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr()) continue;
    const std::string name = opt->get_name();
    if (name.empty() || std::find(leave_out.begin(), leave_out.end(), name) != leave_out.end()) continue;
    fn(name, *opt);
  }
}

}  // namespace

bool was_given(const std::vector<std::string>& given, std::string_view flag) {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

std::vector<std::string> options_given(const CLI::App& app, const std::vector<std::string>& leave_out) {
  std::vector<std::string> out;
  for_each_recorded(app, leave_out, [&](const std::string& name, const CLI::Option& opt) {
    if (opt.count() > 0) out.push_back(name);
  });
  return out;
}

ordered_json option_values(const CLI::App& app, const std::vector<std::string>& leave_out) {
  ordered_json out = ordered_json::object();
  for_each_recorded(app, leave_out, [&](const std::string& name, const CLI::Option& opt) {
    std::string value;
    if (opt.count() > 0) {
      for (const auto& r : opt.results()) value += (value.empty() ? "" : " ") + canonical_value(r);
    } else {
      value = canonical_value(opt.get_default_str());
    }
    out[name] = value;
  });
  return out;
}

void add_common_options(CLI::App& app) {
  if (app.get_option_no_throw("--quiet") != nullptr) return;
  app.add_flag("-q,--quiet", quiet, "Print only errors on stderr");
  app.add_flag("-v,--verbose", verbosity, "More detail on stderr (repeat for debug)");
  app.set_version_flag("--version", std::string(BRAID_VERSION));
}

int report_current_exception() {
  try {
    throw;
  } catch (const InputError& e) {
    log::error("{}", e.what());
    return kExitBadInput;
  } catch (const UsageError& e) {
    log::error("{}", e.what());
    log::write(log::Level::quiet, "", "run with --help for usage");
    return kExitBadInput;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user named that cannot be made or used (an output folder under a
    // file, no permission): their input, named, not an internal error.
    log::error("{}", describe_filesystem_error(e));
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    log::error("out of memory");
    return kExitInternal;
  } catch (const std::exception& e) {
    log::error("internal error: {}", e.what());
    return kExitInternal;
  } catch (...) {
    log::error("internal error: unknown exception");
    return kExitInternal;
  }
}

void set_first_process(bool first) { first_process = first; }

int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  log::set_tool_name(app.get_name().empty() ? std::string("braid") : app.get_name());
  add_common_options(app);
  install_temp_cleanup_on_signals();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return first_process ? finish_stdout(app.exit(e)) : e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (!first_process) return kExitBadInput;
    const std::string unknown = unknown_subcommand(app, argc, argv);
    log::error("{}", unknown.empty() ? std::string(e.what()) : unknown);
    log::write(log::Level::quiet, "", "run with --help for usage");
    return kExitBadInput;
  }
  if (quiet) {
    log::set_level(log::Level::quiet);
  } else if (verbosity > 0) {
    log::set_level(log::Level::debug);
  }
  int code;
  try {
    code = body();
  } catch (...) {
    code = report_current_exception();
  }
  return finish_stdout(code);
}

}  // namespace braid::cli

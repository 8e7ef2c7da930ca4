// braid options: the docs' option tables, made from the tools' option schemas (driver/option_docs.hpp).
#include "driver/option_docs.hpp"
#include "verbs.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace braid::driver {

void add_options_command(CLI::App& app, Verbs& verbs) {
  auto table = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "options", fmt::format("Print a table of options as markdown, made from the tools' option schemas (the tables "
                             "of docs/tools/ and docs/formats-run.md): {}",
                             fmt::join(option_table_names(), ", ")));
  sub->add_option("table", *table, "Which table")->required()->check(CLI::IsMember(option_table_names()));
  verbs.add(sub, [table] {
    std::cout << option_table_markdown(*table);
    return 0;
  });
}

}  // namespace braid::driver

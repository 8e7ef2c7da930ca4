// The docs' option tables, made from the tools' option schemas (core/option_schema.hpp):
// `braid options TABLE` prints one as markdown, and the ctest docs_option_tables fails when
// a table in docs/ differs from what it prints.
#pragma once

#include "core/option_schema.hpp"

#include <string>
#include <vector>

namespace braid::driver {

// One option as the docs show it.
struct OptionRow {
  cli::OptionSpec spec;
  std::string help;       // as --help shows it (the schema's where it depends on the mode)
  std::string defaults;   // the default, and where a mode's differs: "1e-05; dpo 1e-06"
  std::string modes;      // the modes that have it, "" when every mode of the table does
};

// The tables: braid-train-common, braid-train-policy, braid-train-text, braid-generate,
// braid-score, braid-schedgen (its "anneal" keys beside the flags), braid-schedgen-presets
// (not of options: the presets' knobs), run-file, braid-profile (its options over its verbs),
// braid-meshplan; the driver's verbs: braid-eval, braid-synth, braid-data, braid-init,
// braid-import, braid-export, braid-reshard, braid-run, braid-makefile, braid-tokenize,
// braid-inspect.
std::vector<std::string> option_table_names();
// The rows of a table (run-file: every key of the run file's stage sections and eval section).
std::vector<OptionRow> option_rows(const std::string& table);
// The table as markdown; UsageError for a name that is none.
std::string option_table_markdown(const std::string& table);

}  // namespace braid::driver

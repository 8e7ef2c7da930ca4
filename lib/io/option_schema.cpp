#include "io/option_schema.hpp"

namespace braid::io {

const cli::OptionSchema<InspectCommand>& inspect_schema() {
  using cli::field;
  using I = InspectCommand;
  using namespace cli::option_types;
  static const cli::OptionSchema<I> s = {
      field<I>(&I::file, {.flag = "file", .type = path,
                          .help = "The file (\"-\": a JSON file on stdin; a checkpoint's name: each of its stage and tp files)",
                          .required = true, .show_default = false}),
      field<I>(&I::json, {.flag = "--json", .type = boolean, .help = "Print the summary as JSON for scripts",
                          .show_default = false}),
      field<I>([](I& o) -> std::size_t& { return o.opt.samples_shown; },
               {.flag = "-n,--samples", .type = integer, .help = "Sample shards: how many sequences to decode",
                .bounds = {.min = 0, .max = cli::kMaxCount}}),
      field<I>([](I& o) -> std::string& { return o.opt.tokenizer; },
               {.flag = "--tokenizer", .type = path,
                .help = "Sample shards: decode with this tokenizer (\"byte\", a tokenizer.json or its folder); by default "
                        "the one the shard's meta.config records, when it is there",
                .show_default = false}),
  };
  return s;
}

}  // namespace braid::io

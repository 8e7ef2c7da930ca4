#include "data/option_schema.hpp"

namespace braid::data {

const cli::OptionSchema<PrepareCommand>& data_schema() {
  using cli::field;
  using D = PrepareCommand;
  using namespace cli::option_types;
  static const cli::OptionSchema<D> s = {
      field<D>([](D& o) -> std::string& { return o.opt.input; },
               {.flag = "prompts", .type = path, .help = "The prompt file (JSON Lines)", .required = true,
                .show_default = false}),
      field<D>([](D& o) -> std::string& { return o.opt.out_dir; },
               {.flag = "-o,--output", .type = path, .help = "Output folder", .required = true, .show_default = false}),
      field<D>([](D& o) -> std::vector<std::string>& { return o.opt.fields; },
               {.flag = "--field", .type = text,
                .help = "NAME=KEY: the file's KEY holds braid's NAME (prompt, answer or messages), e.g. prompt=question; "
                        "repeat for several",
                .show_default = false}),
      field<D>(&D::heldout, {.flag = "--heldout", .type = text,
                             .help = "Lines to hold out: a count, or a fraction of the file like 0.1",
                             .show_default = false}),
      field<D>([](D& o) -> std::uint64_t& { return o.opt.seed; },
               {.flag = "--seed", .type = integer, .help = "Seed of the split"}),
  };
  return s;
}

}  // namespace braid::data

// braid data PROMPTS -o DIR: a prompt file made ready for a run (lib/data): its field map
// applied (a GSM8K {"question", "answer"} line read as {"prompt", "answer"}) and a seeded
// held-out split, into DIR/train.jsonl and DIR/heldout.jsonl. Prints a summary (JSON).
#include <iostream>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "data/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

int run_data(data::PrepareCommand& o) {
  if (!o.heldout.empty()) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(o.heldout, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool count = o.heldout.find_first_not_of("0123456789") == std::string::npos;
    if (used != o.heldout.size() || !(v > 0) || (!count && v >= 1)) {
      throw UsageError("--heldout: '" + o.heldout + "' is neither a count of lines nor a fraction in (0, 1)");
    }
    if (count) {
      o.opt.heldout.count = static_cast<std::int64_t>(v);
    } else {
      o.opt.heldout.fraction = v;
    }
  }
  std::cout << data::prepare_dataset(o.opt) << '\n';
  return 0;
}

}  // namespace

void add_data_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<data::PrepareCommand>();
  auto* sub = app.add_subcommand(
      "data", "Make a prompt file ready for a run: rename its keys to prompt / answer / messages (--field) and hold "
              "out a seeded part for evaluation, into DIR/train.jsonl and DIR/heldout.jsonl");
  cli::add_schema_options(*sub, *o, data::data_schema());
  verbs.add(sub, [o] { return run_data(*o); });
}

}  // namespace braid::driver

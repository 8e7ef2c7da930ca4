#include "verbs.hpp"

#include "core/error.hpp"

namespace braid::driver {

int Verbs::run() const {
  for (const auto& [sub, body] : verbs_) {
    if (sub->parsed()) return body();
  }
  throw UsageError("no verb given");
}

bool verbose(const CLI::App& app) {
  const CLI::Option* v = app.get_option_no_throw("--verbose");
  return v != nullptr && v->count() > 0;
}

}  // namespace braid::driver

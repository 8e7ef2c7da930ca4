#include "driver/kl_control.hpp"

#include <algorithm>
#include <cmath>
#include <system_error>

#include "core/error.hpp"
#include "core/json.hpp"

namespace braid::driver {

double adaptive_kl_update(double coef, double kl, double target, double n_steps, double horizon) {
  const double proportional_error = std::clamp(kl / target - 1.0, -0.2, 0.2);
  return coef * (1.0 + proportional_error * n_steps / horizon);
}

std::optional<double> iteration_kl_coef(const RunSpec& spec, const Layout& layout, int iteration) {
  if (!spec.kl_target || iteration <= 1) return spec.kl_coef_start;
  const auto path = layout.iteration_metrics(iteration - 1);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const json m = load_json_file(path.string());
  Checker c(path.string());
  const auto used = c.number(m, "", "kl_coef", {.min = 0});
  const auto kl = c.number(m, "", "kl");
  const auto length = c.number(m, "", "mean_response_length", {.min = 0});
  const auto sequences = c.integer(m, "", "sequences", {.min = 0});
  c.check();
  return adaptive_kl_update(*used, *kl * *length, *spec.kl_target, double(*sequences), spec.kl_horizon);
}

}  // namespace braid::driver

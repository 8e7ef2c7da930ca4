// Adaptive KL control (Ziegler et al. 2019, "Fine-Tuning Language Models from Human
// Preferences"; TRL's and OpenRLHF's AdaptiveKLController): PPO's KL penalty coefficient
// β follows a target KL. After an iteration that measured KL over n samples,
//
//   β ← β · (1 + clip(KL / target − 1, −0.2, 0.2) · n / horizon)
//
// where KL is the mean over sequences of the KL summed over each response's tokens (as
// TRL measures it: OUT/iter-N/metrics.json's kl × mean_response_length) and n the
// iteration's sequences. `braid run` passes iteration i's β to braid-score as --kl-coef,
// derived from iteration i−1's metrics.json (the β it used, its KL and sequences), so a
// resumed run continues with the same β; braid-score itself keeps a fixed --kl-coef.
#pragma once

#include <cstdint>
#include <optional>

#include "driver/layout.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

// One update of the controller.
double adaptive_kl_update(double coef, double kl, double target, double n_steps, double horizon);

// β for iteration i (from 1) of a run with score.kl_target: spec.kl_coef_start for the
// first, else the update from iteration i−1's metrics.json; nullopt while that file is not
// written yet (a dry run's later iterations). InputError naming the metrics file when it
// lacks the figures.
std::optional<double> iteration_kl_coef(const RunSpec& spec, const Layout& layout, int iteration);

}  // namespace braid::driver

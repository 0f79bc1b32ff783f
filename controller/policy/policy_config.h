// PolicyConfig: the parameters of the GraVAC policy engine (GRAVAC.md, "Parameters"), with the
// reference defaults, and their validation.
//
// Validate() returns InvalidArgument naming the first bad field and the rule it breaks:
//   1 <= θ_min <= θ_max (finite); geometric s > 1; exponential needs θ_min > 1;
//   ε > 0; ω > 0; W >= 1; 0 <= α < 1; T_eval > W; min_dwell >= 0; 0 <= min_relative_gain <= 1.
// T_eval must exceed W because a candidate's tracker restarts empty when the candidate changes and
// the candidate can only be used once that tracker holds W samples: with T_eval <= W no candidate
// would ever be measured.
//
// norm_mode says what the statistics producers put in N_g, N_min and N_c; the engine treats both
// modes alike (gain = ratio of the smoothed sums). In kGlobalSquaredL2 the gain is an energy ratio,
// the square of a norm ratio, so a comparable ε is the square of the kSumOfLayerL2 one. Both modes
// are sums and so combine across nodes by addition.
//
// Thread-safety: a plain value type.
#ifndef GRAVAC_CONTROLLER_POLICY_POLICY_CONFIG_H_
#define GRAVAC_CONTROLLER_POLICY_POLICY_CONFIG_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/policy/scaling_policy.h"
#include "core/job_settings.h"

namespace gravac::policy {

enum class NormMode {
  kSumOfLayerL2,     // Σ_layers ‖g_l‖₂ (as the reference)
  kGlobalSquaredL2,  // Σ_layers ‖g_l‖₂² = ‖g‖₂² of the whole gradient
};

std::string_view NormModeName(NormMode mode);  // "sum_layer_l2" / "global_squared_l2"
absl::StatusOr<NormMode> ParseNormMode(std::string_view name);

// The defaults are the job settings' (core/job_settings.h).
struct PolicyConfig {
  // least compression: warm-up, fallback, first candidate
  double theta_min = job_defaults::kThetaMin;
  double theta_max = job_defaults::kThetaMax;  // most compression the search may reach
  ScalingKind scaling = job_defaults::kPolicy == "exponential" ? ScalingKind::kExponential
                                                               : ScalingKind::kGeometric;
  double scaling_factor = job_defaults::kScale;  // s, geometric only
  double epsilon = job_defaults::kEpsilon;       // ε: least acceptable compression gain
  // ω: the search stops when the two best CT means differ by less
  double omega = job_defaults::kOmega;
  int window = job_defaults::kWindow;  // W: tracker window and warm-up length, in steps
  double alpha = job_defaults::kAlpha;  // α: tracker smoothing
  // T_eval: steps per candidate (the reference: one epoch)
  int64_t eval_steps = job_defaults::kEvalSteps;
  // Hysteresis of the per-step choice: a θ chosen among θ_min, θ_c and dense is kept for at
  // least this many observed steps before the gains may change it (GravacPolicy, step 6).
  // 0 (or 1) is the paper's choice, free to change every step.
  int min_dwell = job_defaults::kMinDwell;
  // Accuracy guard on the candidate (GravacPolicy, step 6): θ_c is chosen only while
  // gain_c >= min_relative_gain · gain_min, i.e. the candidate keeps at least this share of the
  // norm θ_min keeps from the same compensated gradient. Error feedback inflates both gains alike
  // (the residual adds to g), so it cancels in the ratio, while ε alone let θ = 1000 through on the
  // Fashion-MNIST CNN at gain_c 0.80 (gain_min 2.16). 0 is the paper's rule, ε alone. Like ε, in
  // kGlobalSquaredL2 the ratio is an energy ratio: the comparable value is the square.
  double min_relative_gain = job_defaults::kMinRelativeGain;
  NormMode norm_mode = job_defaults::kNormMode == "global_squared_l2" ? NormMode::kGlobalSquaredL2
                                                                      : NormMode::kSumOfLayerL2;

  absl::Status Validate() const;
  ScalingParams scaling_params() const { return {scaling, scaling_factor, theta_min, theta_max}; }
};

}  // namespace gravac::policy

#endif  // GRAVAC_CONTROLLER_POLICY_POLICY_CONFIG_H_

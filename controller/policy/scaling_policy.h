// Scaling policies: how the GraVAC search moves its candidate compression factor θ_c.
//
//   geometric:    θ ← θ · s          (s > 1; with θ_min = 10, s = 2: 10, 20, 40, 80, ...)
//   exponential:  θ ← θ · θ_min      (θ_min > 1; with θ_min = 10: 10, 100, 1000, ...)
//
// Either way the result is clamped to θ_max, so the sequence is strictly increasing until it
// reaches θ_max and then stays there. The θ values are doubles (a CF need not be an integer);
// products of small integers stay exact.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_CONTROLLER_POLICY_SCALING_POLICY_H_
#define GRAVAC_CONTROLLER_POLICY_SCALING_POLICY_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::policy {

enum class ScalingKind { kGeometric, kExponential };

struct ScalingParams {
  ScalingKind kind = ScalingKind::kGeometric;
  double factor = 2.0;  // s, geometric only
  double theta_min = 10.0;
  double theta_max = 10000.0;
};

// InvalidArgument unless 1 <= θ_min <= θ_max (finite), and the step grows θ: geometric needs a
// finite s > 1, exponential needs θ_min > 1.
absl::Status ValidateScaling(const ScalingParams& params);

// The candidate after `theta`: min(θ·s or θ·θ_min, θ_max). Precondition: ValidateScaling(params)
// is OK and θ_min <= theta <= θ_max.
double NextCandidate(const ScalingParams& params, double theta);

// "geometric" / "exponential", for settings, logs and metrics.
std::string_view ScalingKindName(ScalingKind kind);
absl::StatusOr<ScalingKind> ParseScalingKind(std::string_view name);

}  // namespace gravac::policy

#endif  // GRAVAC_CONTROLLER_POLICY_SCALING_POLICY_H_

#include "controller/policy/scaling_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "core/enum_names.h"

namespace gravac::policy {

absl::Status ValidateScaling(const ScalingParams& p) {
  if (!std::isfinite(p.theta_min) || p.theta_min < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("theta_min = %g, must be a finite CF >= 1", p.theta_min));
  }
  if (!std::isfinite(p.theta_max) || p.theta_max < p.theta_min) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "theta_max = %g, must be finite and >= theta_min (%g)", p.theta_max, p.theta_min));
  }
  switch (p.kind) {
    case ScalingKind::kGeometric:
      if (!std::isfinite(p.factor) || p.factor <= 1.0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "geometric scaling factor s = %g, must be finite and > 1 (theta <- theta*s)",
            p.factor));
      }
      return absl::OkStatus();
    case ScalingKind::kExponential:
      if (p.theta_min <= 1.0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "exponential scaling needs theta_min > 1 (theta <- theta*theta_min), got %g",
            p.theta_min));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown scaling kind");
}

double NextCandidate(const ScalingParams& p, double theta) {
  const double step = p.kind == ScalingKind::kGeometric ? p.factor : p.theta_min;
  return std::min(theta * step, p.theta_max);
}

namespace {

constexpr EnumName<ScalingKind> kScalingKinds[] = {{ScalingKind::kGeometric, "geometric"},
                                                   {ScalingKind::kExponential, "exponential"}};

}  // namespace

std::string_view ScalingKindName(ScalingKind kind) { return NameOf(kScalingKinds, kind); }

absl::StatusOr<ScalingKind> ParseScalingKind(std::string_view name) {
  return ParseEnum(kScalingKinds, name, "scaling policy");
}

}  // namespace gravac::policy

#include "controller/policy/policy_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/policy/window_tracker.h"
#include "core/enum_names.h"

namespace gravac::policy {

namespace {

constexpr EnumName<NormMode> kNormModes[] = {{NormMode::kSumOfLayerL2, "sum_layer_l2"},
                                              {NormMode::kGlobalSquaredL2, "global_squared_l2"}};

}  // namespace

std::string_view NormModeName(NormMode mode) { return NameOf(kNormModes, mode); }

absl::StatusOr<NormMode> ParseNormMode(std::string_view name) {
  return ParseEnum(kNormModes, name, "norm mode");
}

absl::Status PolicyConfig::Validate() const {
  if (absl::Status s = ValidateScaling(scaling_params()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("policy config: ", s.message()));
  }
  if (!std::isfinite(epsilon) || epsilon <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("policy config: epsilon = %g, must be finite and > 0", epsilon));
  }
  if (!std::isfinite(omega) || omega <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("policy config: omega = %g, must be finite and > 0", omega));
  }
  if (absl::Status s = WindowTracker::ValidateParams(window, alpha); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("policy config: ", s.message()));
  }
  if (eval_steps <= window) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy config: eval_steps (T_eval) = %d, must be > window (W = %d): a new candidate "
        "needs W steps to fill its tracker before it can be used",
        eval_steps, window));
  }
  if (min_dwell < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("policy config: min_dwell = %d, must be >= 0 (0: no dwell)", min_dwell));
  }
  if (!std::isfinite(min_relative_gain) || min_relative_gain < 0.0 || min_relative_gain > 1.0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy config: min_relative_gain = %g, must be within [0, 1] (0: epsilon alone)",
        min_relative_gain));
  }
  if (norm_mode != NormMode::kSumOfLayerL2 && norm_mode != NormMode::kGlobalSquaredL2) {
    return absl::InvalidArgumentError("policy config: unknown norm_mode");
  }
  return absl::OkStatus();
}

}  // namespace gravac::policy

#include "controller/policy/policy_config.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(PolicyConfigTest, DefaultsAreTheReferenceOnes) {
  const PolicyConfig c;
  EXPECT_EQ(c.theta_min, 10.0);
  EXPECT_EQ(c.theta_max, 10000.0);
  EXPECT_EQ(c.scaling, ScalingKind::kGeometric);
  EXPECT_EQ(c.scaling_factor, 2.0);
  EXPECT_EQ(c.epsilon, 0.75);
  EXPECT_EQ(c.omega, 0.05);
  EXPECT_EQ(c.window, 25);
  EXPECT_EQ(c.alpha, 0.05);
  EXPECT_EQ(c.norm_mode, NormMode::kSumOfLayerL2);
  EXPECT_EQ(c.min_dwell, 25);  // not the reference's: it has no dwell (min_dwell = 0)
  EXPECT_EQ(c.min_relative_gain, 0.6);  // not the reference's: it has ε alone (0)
  EXPECT_THAT(c.Validate(), IsOk());
}

struct BadCase {
  std::string name;
  std::function<void(PolicyConfig&)> mutate;
  std::string message;
};

TEST(PolicyConfigTest, RejectsEachBadField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const BadCase cases[] = {
      {"theta_min < 1", [](PolicyConfig& c) { c.theta_min = 0.5; }, "theta_min = 0.5"},
      {"theta_min nan", [nan](PolicyConfig& c) { c.theta_min = nan; }, "theta_min"},
      {"theta_max < theta_min", [](PolicyConfig& c) { c.theta_max = 5; }, "theta_max = 5"},
      {"theta_max inf",
       [](PolicyConfig& c) { c.theta_max = std::numeric_limits<double>::infinity(); }, "theta_max"},
      {"s = 1", [](PolicyConfig& c) { c.scaling_factor = 1.0; }, "s = 1"},
      {"exponential with theta_min 1",
       [](PolicyConfig& c) {
         c.scaling = ScalingKind::kExponential;
         c.theta_min = 1.0;
       },
       "exponential"},
      {"epsilon 0", [](PolicyConfig& c) { c.epsilon = 0.0; }, "epsilon = 0"},
      {"epsilon nan", [nan](PolicyConfig& c) { c.epsilon = nan; }, "epsilon"},
      {"omega 0", [](PolicyConfig& c) { c.omega = 0.0; }, "omega = 0"},
      {"omega negative", [](PolicyConfig& c) { c.omega = -0.1; }, "omega = -0.1"},
      {"window 0", [](PolicyConfig& c) { c.window = 0; }, "W = 0"},
      {"alpha 1", [](PolicyConfig& c) { c.alpha = 1.0; }, "alpha = 1"},
      {"alpha negative", [](PolicyConfig& c) { c.alpha = -0.01; }, "alpha = -0.01"},
      {"eval_steps 0", [](PolicyConfig& c) { c.eval_steps = 0; }, "eval_steps (T_eval) = 0"},
      {"eval_steps == window", [](PolicyConfig& c) { c.eval_steps = 25; },
       "must be > window (W = 25)"},
      {"min_dwell negative", [](PolicyConfig& c) { c.min_dwell = -1; }, "min_dwell = -1"},
      {"min_relative_gain negative", [](PolicyConfig& c) { c.min_relative_gain = -0.1; },
       "min_relative_gain = -0.1"},
      {"min_relative_gain above 1", [](PolicyConfig& c) { c.min_relative_gain = 1.5; },
       "min_relative_gain = 1.5"},
      {"min_relative_gain nan", [nan](PolicyConfig& c) { c.min_relative_gain = nan; },
       "min_relative_gain = nan"},
      {"norm mode", [](PolicyConfig& c) { c.norm_mode = static_cast<NormMode>(7); }, "norm_mode"},
  };
  for (const BadCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    PolicyConfig c;
    bad.mutate(c);
    EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad.message)));
    EXPECT_THAT(c.Validate(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("policy config")));
  }
}

TEST(PolicyConfigTest, AcceptsBoundaryValues) {
  PolicyConfig c;
  c.theta_min = 1.0;
  c.theta_max = 1.0;
  c.alpha = 0.0;
  c.window = 1;
  c.eval_steps = 2;
  c.min_dwell = 0;
  c.min_relative_gain = 0.0;
  EXPECT_THAT(c.Validate(), IsOk());
  c.min_relative_gain = 1.0;
  EXPECT_THAT(c.Validate(), IsOk());
  c.scaling = ScalingKind::kExponential;
  c.theta_min = 1.5;
  c.theta_max = 1.5;
  EXPECT_THAT(c.Validate(), IsOk());
}

TEST(PolicyConfigTest, NormModeNamesRoundTrip) {
  for (NormMode mode : {NormMode::kSumOfLayerL2, NormMode::kGlobalSquaredL2}) {
    ASSERT_OK_AND_ASSIGN(NormMode parsed, ParseNormMode(NormModeName(mode)));
    EXPECT_EQ(parsed, mode);
  }
  EXPECT_THAT(ParseNormMode("l1"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l1")));
}

}  // namespace
}  // namespace gravac::policy

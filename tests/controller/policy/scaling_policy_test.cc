#include "controller/policy/scaling_policy.h"

#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<double> Sequence(const ScalingParams& p) {
  std::vector<double> out = {p.theta_min};
  while (out.back() < p.theta_max) out.push_back(NextCandidate(p, out.back()));
  return out;
}

TEST(ScalingPolicyTest, GeometricDoublesAndClampsToThetaMax) {
  const ScalingParams p{ScalingKind::kGeometric, 2.0, 10.0, 10000.0};
  ASSERT_THAT(ValidateScaling(p), IsOk());
  EXPECT_THAT(Sequence(p), ElementsAre(10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10000));
  EXPECT_EQ(NextCandidate(p, 10000.0), 10000.0);  // stays at θ_max
}

TEST(ScalingPolicyTest, ExponentialMultipliesByThetaMin) {
  const ScalingParams p{ScalingKind::kExponential, 2.0, 10.0, 10000.0};
  ASSERT_THAT(ValidateScaling(p), IsOk());
  EXPECT_THAT(Sequence(p), ElementsAre(10, 100, 1000, 10000));
  const ScalingParams q{ScalingKind::kExponential, 2.0, 10.0, 5000.0};
  EXPECT_THAT(Sequence(q), ElementsAre(10, 100, 1000, 5000));
}

TEST(ScalingPolicyTest, NonIntegerFactor) {
  const ScalingParams p{ScalingKind::kGeometric, 1.5, 4.0, 20.0};
  EXPECT_THAT(Sequence(p), ElementsAre(4, 6, 9, 13.5, 20));
}

TEST(ScalingPolicyTest, EqualBoundsGiveOneCandidate) {
  const ScalingParams p{ScalingKind::kGeometric, 2.0, 10.0, 10.0};
  ASSERT_THAT(ValidateScaling(p), IsOk());
  EXPECT_EQ(NextCandidate(p, 10.0), 10.0);
}

TEST(ScalingPolicyTest, RejectsParametersThatDoNotGrow) {
  EXPECT_THAT(ValidateScaling({ScalingKind::kGeometric, 1.0, 10.0, 100.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("s = 1")));
  EXPECT_THAT(ValidateScaling({ScalingKind::kExponential, 2.0, 1.0, 100.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta_min > 1")));
  EXPECT_THAT(ValidateScaling({ScalingKind::kGeometric, 2.0, 0.5, 100.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta_min = 0.5")));
  EXPECT_THAT(ValidateScaling({ScalingKind::kGeometric, 2.0, 10.0, 5.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta_max = 5")));
  // Geometric with θ_min = 1 is fine: 1, 2, 4, ...
  EXPECT_THAT(ValidateScaling({ScalingKind::kGeometric, 2.0, 1.0, 8.0}), IsOk());
}

TEST(ScalingPolicyTest, NamesRoundTrip) {
  for (ScalingKind kind : {ScalingKind::kGeometric, ScalingKind::kExponential}) {
    ASSERT_OK_AND_ASSIGN(ScalingKind parsed, ParseScalingKind(ScalingKindName(kind)));
    EXPECT_EQ(parsed, kind);
  }
  EXPECT_THAT(ParseScalingKind("linear"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("linear")));
}

}  // namespace
}  // namespace gravac::policy

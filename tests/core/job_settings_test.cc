// core/job_settings.h: the job settings table is the one source of the policy defaults: every
// row's default text is its typed default, and every row is a well-formed setting.
#include "core/job_settings.h"

#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "core/absl_compat.h"
#include "core/job_types.h"
#include "core/settings.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

// The value of `v`, or a test failure and T{}.
template <typename T>
T Ok(const absl::StatusOr<T>& v) {
  if (!v.ok()) {
    ADD_FAILURE() << v.status().ToString();
    return T{};
  }
  return *v;
}

absl::StatusOr<Settings> Defaults() {
  return Settings::Parse(JobSettings(), {}, FixedEnvironment({}));
}

TEST(JobSettingsTest, DefaultTextsAreTheTypedDefaults) {
  ASSERT_OK_AND_ASSIGN(Settings s, Defaults());
  EXPECT_EQ(Ok(s.GetString("compressor")), std::string(job_defaults::kCompressor));
  EXPECT_EQ(Ok(s.GetString("sparse_values")), std::string(job_defaults::kSparseValues));
  EXPECT_EQ(Ok(s.GetDouble("theta_min")), job_defaults::kThetaMin);
  EXPECT_EQ(Ok(s.GetDouble("theta_max")), job_defaults::kThetaMax);
  EXPECT_EQ(Ok(s.GetDouble("epsilon")), job_defaults::kEpsilon);
  EXPECT_EQ(Ok(s.GetDouble("omega")), job_defaults::kOmega);
  EXPECT_EQ(Ok(s.GetString("policy")), std::string(job_defaults::kPolicy));
  EXPECT_EQ(Ok(s.GetDouble("scale")), job_defaults::kScale);
  EXPECT_EQ(Ok(s.GetInt("window")), job_defaults::kWindow);
  EXPECT_EQ(Ok(s.GetDouble("alpha")), job_defaults::kAlpha);
  EXPECT_EQ(Ok(s.GetInt("eval_steps")), job_defaults::kEvalSteps);
  EXPECT_EQ(Ok(s.GetInt("min_dwell")), job_defaults::kMinDwell);
  EXPECT_EQ(Ok(s.GetDouble("min_relative_gain")), job_defaults::kMinRelativeGain);
  EXPECT_EQ(Ok(s.GetString("norm_mode")), std::string(job_defaults::kNormMode));
  EXPECT_EQ(Ok(s.GetInt("job_seed")), static_cast<int64_t>(job_defaults::kJobSeed));
}

// JobConfig and the initial decision start from the same defaults.
TEST(JobSettingsTest, JobConfigUsesTheTableDefaults) {
  const JobConfig job;
  EXPECT_EQ(job.compressor, job_defaults::kCompressor);
  EXPECT_EQ(job.sparse_values, job_defaults::kSparseValues);
  EXPECT_EQ(job.theta_min, job_defaults::kThetaMin);
  EXPECT_EQ(job.theta_max, job_defaults::kThetaMax);
  EXPECT_EQ(job.job_seed, job_defaults::kJobSeed);
  EXPECT_EQ(job.global_norm, job_defaults::kNormMode == "global_squared_l2");
  const JobDecision decision;
  EXPECT_EQ(decision.theta, job_defaults::kThetaMin);
  EXPECT_EQ(decision.theta_candidate, job_defaults::kThetaMin);
}

// Each row has a unique name and the environment variable GRAVAC_<NAME>.
TEST(JobSettingsTest, RowsAreWellFormed) {
  std::set<std::string> names;
  for (const SettingSpec& spec : JobSettings()) {
    EXPECT_TRUE(names.insert(std::string(spec.name)).second) << spec.name;
    EXPECT_EQ(spec.env, "GRAVAC_" + absl::AsciiStrToUpper(AsAbsl(spec.name))) << spec.name;
    EXPECT_FALSE(spec.help.empty()) << spec.name;
  }
}

TEST(JobSettingsTest, EnvironmentOverridesTheDefault) {
  const char* args[] = {"--window=7"};
  ASSERT_OK_AND_ASSIGN(Settings s, Settings::Parse(JobSettings(), args,
                                                   FixedEnvironment({{"GRAVAC_THETA_MIN", "4"}})));
  EXPECT_EQ(Ok(s.GetDouble("theta_min")), 4.0);
  EXPECT_EQ(Ok(s.GetInt("window")), 7);
}

}  // namespace
}  // namespace gravac

// controller_settings.h: gravac-controller's table holds every job setting of
// core/job_settings.h, the defaults reach the policy and the job unchanged, and bad values are
// refused naming the setting.
#include "controller/controller_settings.h"

#include <set>
#include <string>
#include <vector>

#include "controller/policy/policy_config.h"
#include "core/job_settings.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::controller {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ControllerServerOptions> Parse(std::vector<const char*> args,
                                              std::map<std::string, std::string, std::less<>> env =
                                                  {}) {
  // Plain text unless the test's environment says otherwise (the TLS settings: TlsSettings*).
  env.emplace("GRAVAC_INSECURE_PLAINTEXT", "true");
  const std::vector<SettingSpec> table = ControllerSettings();
  ASSIGN_OR_RETURN(Settings s, Settings::Parse(table, args, FixedEnvironment(std::move(env))));
  return OptionsFromSettings(s, nullptr);
}

TEST(ControllerSettings, TableHoldsEveryJobSettingOnce) {
  std::set<std::string> names;
  for (const SettingSpec& spec : ControllerSettings()) {
    EXPECT_TRUE(names.insert(std::string(spec.name)).second) << spec.name;
  }
  for (const SettingSpec& spec : JobSettings()) EXPECT_TRUE(names.count(std::string(spec.name)));
  for (const char* own : {"listen", "port_file", "metrics_address", "metrics_port_file", "nodes",
                          "join_timeout_s", "log_level"}) {
    EXPECT_TRUE(names.count(own)) << own;
  }
}

// The defaults of the table are the defaults of PolicyConfig and of the job.
TEST(ControllerSettings, DefaultsAreThePolicyAndJobDefaults) {
  ASSERT_OK_AND_ASSIGN(ControllerServerOptions o, Parse({}));
  const policy::PolicyConfig defaults;
  const policy::PolicyConfig& p = o.coordinator.policy;
  EXPECT_EQ(p.theta_min, defaults.theta_min);
  EXPECT_EQ(p.theta_max, defaults.theta_max);
  EXPECT_EQ(p.scaling, defaults.scaling);
  EXPECT_EQ(p.scaling_factor, defaults.scaling_factor);
  EXPECT_EQ(p.epsilon, defaults.epsilon);
  EXPECT_EQ(p.omega, defaults.omega);
  EXPECT_EQ(p.window, defaults.window);
  EXPECT_EQ(p.alpha, defaults.alpha);
  EXPECT_EQ(p.eval_steps, defaults.eval_steps);
  EXPECT_EQ(p.min_dwell, 25);
  EXPECT_EQ(p.min_relative_gain, defaults.min_relative_gain);
  EXPECT_EQ(p.norm_mode, defaults.norm_mode);
  EXPECT_EQ(o.coordinator.compressor, job_defaults::kCompressor);
  EXPECT_EQ(o.coordinator.sparse_values, job_defaults::kSparseValues);
  EXPECT_EQ(o.coordinator.job_seed, job_defaults::kJobSeed);
  EXPECT_EQ(o.coordinator.nodes, 1);
  EXPECT_EQ(o.coordinator.join_timeout, absl::Seconds(120));
  EXPECT_TRUE(o.coordinator.decision_delay.empty());
  EXPECT_EQ(o.regroup_timeout, absl::Seconds(10));
  EXPECT_EQ(o.new_node_wait, absl::Seconds(60));
}

TEST(ControllerSettings, NewNodeWaitReachesTheOptionsAndMustBePositive) {
  ASSERT_OK_AND_ASSIGN(ControllerServerOptions o, Parse({"--new_node_wait_s=2.5"}));
  EXPECT_EQ(o.new_node_wait, absl::Milliseconds(2500));
  ASSERT_OK_AND_ASSIGN(o, Parse({}, {{"GRAVAC_NEW_NODE_WAIT_S", "90"}}));
  EXPECT_EQ(o.new_node_wait, absl::Seconds(90));
  EXPECT_THAT(Parse({"--new_node_wait_s=0"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("new_node_wait_s: must be > 0, got 0")));
}

TEST(ControllerSettings, FlagsAndEnvironmentReachTheOptions) {
  ASSERT_OK_AND_ASSIGN(
      ControllerServerOptions o,
      Parse({"--nodes=3", "--compressor=dgc", "--theta_max=500", "--policy=exponential",
             "--norm_mode=global_squared_l2", "--decision_delay=1:300", "--listen=127.0.0.1:0"},
            {{"GRAVAC_WINDOW", "5"}, {"GRAVAC_EVAL_STEPS", "40"}, {"GRAVAC_MIN_DWELL", "0"},
             {"GRAVAC_MIN_RELATIVE_GAIN", "0"}}));
  EXPECT_EQ(o.listen, "127.0.0.1:0");
  EXPECT_EQ(o.coordinator.nodes, 3);
  EXPECT_EQ(o.coordinator.compressor, "dgc");
  EXPECT_EQ(o.coordinator.policy.theta_max, 500.0);
  EXPECT_EQ(o.coordinator.policy.scaling, policy::ScalingKind::kExponential);
  EXPECT_EQ(o.coordinator.policy.norm_mode, policy::NormMode::kGlobalSquaredL2);
  EXPECT_EQ(o.coordinator.policy.window, 5);
  EXPECT_EQ(o.coordinator.policy.eval_steps, 40);
  EXPECT_EQ(o.coordinator.policy.min_dwell, 0);  // the paper's per-step choice
  EXPECT_EQ(o.coordinator.policy.min_relative_gain, 0.0);  // the paper's ε alone
  EXPECT_EQ(o.coordinator.decision_delay.at(1), absl::Milliseconds(300));
}

TEST(ControllerSettings, BadValuesNameTheSetting) {
  EXPECT_THAT(Parse({"--compressor=zip"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compressor: 'zip'")));
  EXPECT_THAT(Parse({"--sparse_values=fp8"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sparse_values: 'fp8'")));
  EXPECT_THAT(Parse({"--theta_min=20", "--theta_max=5"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse({"--decision_delay=x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("decision_delay")));
  EXPECT_THAT(Parse({"--min_relative_gain=2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_relative_gain = 2")));
  EXPECT_THAT(Parse({"--window=abc"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("setting 'window'")));
}

TEST(ControllerSettings, ParseDecisionDelay) {
  ASSERT_OK_AND_ASSIGN(auto none, ParseDecisionDelay(""));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(auto two, ParseDecisionDelay("1:300,0:5"));
  EXPECT_EQ(two.at(1), absl::Milliseconds(300));
  EXPECT_EQ(two.at(0), absl::Milliseconds(5));
  EXPECT_THAT(ParseDecisionDelay("1=300"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'1=300'")));
  EXPECT_THAT(ParseDecisionDelay("-1:5"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::controller

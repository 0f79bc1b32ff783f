// ControllerMetrics driven by a real Coordinator in-process (metrics endpoint "off", the registry
// read back with SerializeMetrics): configuration, membership and decision streams, decisions
// and the search state, combined steps and the CT table, refused statistics by reason, and
// counters that keep counting across a controller restarted in the same process.
#include "controller/controller_metrics.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "controller/coordinator.h"
#include "core/metrics.h"
#include "core/testing/status_matchers.h"
#include "core/testing/step_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/coordinator_fixture.h"

namespace gravac::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

// The series name without the labels of the fixture's job (job_name="default", run_id=""), so
// the expectations below read as for one job.
std::string WithoutJobLabels(std::string series) {
  for (const std::string label : {"job_name=\"default\"", "run_id=\"\""}) {
    const size_t at = series.find(label);
    if (at == std::string::npos) continue;
    size_t len = label.size();
    if (at + len < series.size() && series[at + len] == ',') {
      ++len;
    } else if (at > 0 && series[at - 1] == ',') {
      series.erase(at - 1, len + 1);
      continue;
    }
    series.erase(at, len);
  }
  const size_t empty = series.find("{}");
  if (empty != std::string::npos) series.erase(empty, 2);
  return series;
}

// Every sample line of the text format: series (name{labels}) -> value. With `strip_job`, the
// fixture's job labels are left out of the names.
std::map<std::string, double> Samples(const std::string& text, bool strip_job = true) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    std::string series(line.substr(0, space));
    out[strip_job ? WithoutJobLabels(series) : series] =
        std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return out;
}

class FakeSubscriber : public DecisionSubscriber {
 public:
  void OnDecision(const JobDecision& d) override { decisions.push_back(d); }
  void OnEnd(const absl::Status& s) override { end = s; }
  std::vector<JobDecision> decisions;
  std::optional<absl::Status> end;
};

constexpr int kRanksPerNode = 2;

JoinRequestInfo Node(int i, int nodes) { return testing::NodeJoin(i, nodes, kRanksPerNode); }

// The small search of coordinator_fixture.h (as in coordinator_test), ω 0.01.
CoordinatorOptions Options(int nodes, CoordinatorObserver* observer) {
  CoordinatorOptions o = testing::SmallSearch(nodes);
  o.policy.omega = 0.01;
  o.join_timeout = absl::Seconds(10);
  o.observer = observer;
  return o;
}

NodeStepStats Stats(int node, int64_t step, const JobDecision& d) {
  return ::gravac::testing::StepUnder(d, node, step);
}

class ControllerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(endpoint_, MetricsEndpoint::Start("off"));
    metrics_ = std::make_unique<ControllerMetrics>(endpoint_->registry());
    observer_ = metrics_->ForJob(JobId{"default", ""});
  }

  std::unique_ptr<Coordinator> Make(int nodes, std::string compressor = "topk",
                                    std::string sparse_values = "fp32") {
    CoordinatorOptions o = Options(nodes, observer_.get());
    o.compressor = std::move(compressor);
    o.sparse_values = std::move(sparse_values);
    auto c = Coordinator::Create(std::move(o));
    EXPECT_THAT(c, IsOk());
    return c.ok() ? std::move(c).value() : nullptr;
  }

  void Assemble(Coordinator& c, int nodes) { testing::Assemble(c, nodes, kRanksPerNode); }
  void Feed(Coordinator& c, int nodes, int64_t from, int64_t to) {
    testing::Feed(c, nodes, from, to);
  }

  std::string Text() { return SerializeMetrics(endpoint_->registry()); }
  // The value of one series; fails the test when it is not exported.
  double Value(const std::string& series) {
    const std::map<std::string, double> samples = Samples(Text());
    auto it = samples.find(series);
    EXPECT_NE(it, samples.end()) << "no series " << series << " in\n" << Text();
    return it == samples.end() ? -1.0 : it->second;
  }
  double Rejected(const std::string& reason) {
    return Value(absl::StrFormat("gravac_stats_rejected_total{reason=\"%s\"}", reason));
  }

  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<ControllerMetrics> metrics_;
  std::unique_ptr<CoordinatorObserver> observer_;  // the job "default"
};

TEST_F(ControllerMetricsTest, ConfigurationMembershipAndStreams) {
  auto c = Make(2);
  EXPECT_EQ(Value(absl::StrFormat(
                "gravac_controller_info{compressor=\"topk\",policy=\"geometric\",sparse_values="
                "\"fp32\",version=\"%s\"}",
                GravacVersion())),
            1);
  EXPECT_EQ(Value("gravac_expected_nodes"), 2);
  EXPECT_EQ(Value("gravac_policy_epsilon"), 0.5);
  EXPECT_EQ(Value("gravac_policy_omega"), 0.01);
  EXPECT_EQ(Value("gravac_policy_theta_min"), 10);
  EXPECT_EQ(Value("gravac_policy_theta_max"), 40);
  EXPECT_EQ(Value("gravac_joined_nodes"), 0);
  EXPECT_EQ(Value("gravac_world_size"), 0);
  EXPECT_EQ(Value("gravac_theta"), 10);
  EXPECT_EQ(Value("gravac_decision_epoch"), 0);
  EXPECT_EQ(Value("gravac_search_phase{phase=\"warmup\"}"), 1);
  EXPECT_EQ(Value("gravac_search_phase{phase=\"searching\"}"), 0);
  EXPECT_EQ(Value("gravac_search_phase{phase=\"done\"}"), 0);

  // A joiner that goes away is no longer counted; the world size is 0 until assembly.
  const int64_t ticket = c->Join(Node(0, 2), [](absl::StatusOr<JoinReply>) {});
  EXPECT_EQ(Value("gravac_joined_nodes"), 1);
  c->CancelJoin(ticket);
  EXPECT_EQ(Value("gravac_joined_nodes"), 0);
  c->Join(Node(1, 2), [](absl::StatusOr<JoinReply>) {});
  EXPECT_EQ(Value("gravac_joined_nodes"), 1);
  EXPECT_EQ(Value("gravac_world_size"), 0);
  c->Join(Node(0, 2), [](absl::StatusOr<JoinReply>) {});
  ASSERT_TRUE(c->assembled());
  EXPECT_EQ(Value("gravac_joined_nodes"), 2);
  EXPECT_EQ(Value("gravac_world_size"), 4);

  // Connected nodes count daemons, not streams: node 0 with two open streams counts once.
  FakeSubscriber a, b, d;
  EXPECT_EQ(Value("gravac_connected_nodes"), 0);
  ASSERT_OK_AND_ASSIGN(int64_t a_id, c->Subscribe(0, &a));
  ASSERT_OK_AND_ASSIGN(int64_t b_id, c->Subscribe(0, &b));
  EXPECT_EQ(Value("gravac_connected_nodes"), 1);
  ASSERT_OK_AND_ASSIGN(int64_t d_id, c->Subscribe(1, &d));
  EXPECT_EQ(Value("gravac_connected_nodes"), 2);
  c->Unsubscribe(a_id);
  EXPECT_EQ(Value("gravac_connected_nodes"), 2);
  c->Unsubscribe(d_id);
  EXPECT_EQ(Value("gravac_connected_nodes"), 1);
  c->Shutdown();  // ends node 0's remaining stream
  EXPECT_EQ(Value("gravac_connected_nodes"), 0);
  c->Unsubscribe(b_id);
  EXPECT_EQ(Value("gravac_connected_nodes"), 0);
}

TEST_F(ControllerMetricsTest, DecisionsStepsAndCompressionThroughput) {
  auto c = Make(2);
  Assemble(*c, 2);
  const double t0 = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  Feed(*c, 2, 0, 30);
  const double t1 = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  const JobDecision now = c->Current();
  const JobStatusInfo status = c->Status();
  ASSERT_GE(now.epoch, 2);  // warm-up ended and the search moved on

  EXPECT_EQ(Value("gravac_decisions_total"), now.epoch);
  EXPECT_EQ(Value("gravac_decision_epoch"), now.epoch);
  EXPECT_EQ(Value("gravac_theta"), now.theta);
  EXPECT_EQ(Value("gravac_theta_candidate"), now.theta_candidate);
  for (const char* phase : {"warmup", "searching", "done"}) {
    EXPECT_EQ(Value(absl::StrFormat("gravac_search_phase{phase=\"%s\"}", phase)),
              now.phase == phase ? 1 : 0)
        << phase;
  }
  // Constant norms: gain_min = 1.8 / 2.0, gain_c = 1.6 / 2.0.
  EXPECT_DOUBLE_EQ(Value("gravac_compression_gain{level=\"min\"}"), 0.9);
  EXPECT_DOUBLE_EQ(Value("gravac_compression_gain{level=\"candidate\"}"), 0.8);
  EXPECT_DOUBLE_EQ(now.gain_c, 0.8);
  const double last = Value("gravac_last_decision_timestamp_seconds");
  EXPECT_GE(last, t0 - 1e-3);
  EXPECT_LE(last, t1 + 1e-3);

  // 30 combined steps of 0.1 s (the slowest node) over 64 samples, 2 x 100 / 2 x 1000 bytes.
  EXPECT_EQ(Value("gravac_job_steps_total"), 30);
  EXPECT_EQ(Value("gravac_job_step_duration_seconds_count"), 30);
  EXPECT_NEAR(Value("gravac_job_step_duration_seconds_sum"), 3.0, 1e-9);
  EXPECT_EQ(Value("gravac_job_step_duration_seconds_bucket{le=\"0.064\"}"), 0);
  EXPECT_EQ(Value("gravac_job_step_duration_seconds_bucket{le=\"0.128\"}"), 30);
  EXPECT_DOUBLE_EQ(Value("gravac_throughput_samples_per_second"), 640);
  EXPECT_EQ(Value("gravac_job_sent_bytes_total"), 6000);
  EXPECT_EQ(Value("gravac_job_dense_equivalent_bytes_total"), 60000);

  // CT per evaluated θ: the policy's table, θ_min at 640 x 0.9 and the candidates at 640 x 0.8.
  int exported = 0;
  for (const auto& [theta, entry] : status.throughput_table) {
    if (entry.samples == 0) continue;
    const double ct = Value(
        absl::StrFormat("gravac_compression_throughput_samples_per_second{theta=\"%g\"}", theta));
    EXPECT_DOUBLE_EQ(ct, entry.mean()) << theta;
    EXPECT_NEAR(ct, theta == 10 ? 576 : 512, 1e-6) << theta;
    ++exported;
  }
  EXPECT_GE(exported, 2);  // θ_min and at least one candidate above it
  const std::map<std::string, double> all = Samples(Text());
  int ct_series = 0;
  for (const auto& [series, value] : all) {
    if (series.starts_with("gravac_compression_throughput_samples_per_second{")) ++ct_series;
  }
  EXPECT_EQ(ct_series, exported);
  for (const char* reason : {"theta_disagrees", "old_epoch", "dropped_by_node",
                             "incomplete_evicted", "policy_refused"}) {
    EXPECT_EQ(Rejected(reason), 0) << reason;
  }
}

TEST_F(ControllerMetricsTest, RejectedStatisticsByReason) {
  auto c = Make(2);
  Assemble(*c, 2);
  JobDecision d = c->Current();
  // θ disagreement: node 1 ran step 0 at another θ.
  ASSERT_THAT(c->ReportStats(Stats(0, 0, d)), IsOk());
  JobDecision other = d;
  other.theta = 20;
  ASSERT_THAT(c->ReportStats(Stats(1, 0, other)), IsOk());
  EXPECT_EQ(Rejected("theta_disagrees"), 1);
  // Entries the daemon dropped before sending.
  ASSERT_THAT(c->ReportStats(Stats(0, 1, d), /*dropped=*/3), IsOk());
  ASSERT_THAT(c->ReportStats(Stats(1, 1, d)), IsOk());
  EXPECT_EQ(Rejected("dropped_by_node"), 3);
  // Step 2 only node 0 reported: given up once step 3 completes.
  ASSERT_THAT(c->ReportStats(Stats(0, 2, d)), IsOk());
  Feed(*c, 2, 3, 4);
  EXPECT_EQ(Rejected("incomplete_evicted"), 1);
  // A combined step the policy refuses (no step time).
  NodeStepStats zero0 = Stats(0, 4, d), zero1 = Stats(1, 4, d);
  zero0.step_seconds = zero1.step_seconds = 0;
  ASSERT_THAT(c->ReportStats(zero0), IsOk());
  ASSERT_THAT(c->ReportStats(zero1), IsOk());
  EXPECT_EQ(Rejected("policy_refused"), 1);
  EXPECT_EQ(Rejected("old_epoch"), 0);
  EXPECT_EQ(Rejected("theta_disagrees"), 1);
  // Steps 1 and 3 were observed; 0, 2 and 4 were not. Bytes count every combined step.
  EXPECT_EQ(Value("gravac_job_steps_total"), 2);
  EXPECT_EQ(Value("gravac_job_sent_bytes_total"), 4 * 200);
  EXPECT_EQ(c->Status().steps_rejected, 2);
  EXPECT_EQ(c->Status().steps_incomplete, 1);
}

TEST_F(ControllerMetricsTest, CountersKeepCountingAcrossARestartedController) {
  int64_t first_epochs = 0;
  {
    auto c = Make(2);
    Assemble(*c, 2);
    Feed(*c, 2, 0, 12);
    first_epochs = c->Current().epoch;
    ASSERT_GE(first_epochs, 1);
    EXPECT_EQ(Value("gravac_job_steps_total"), 12);
    EXPECT_THAT(Text(),
                HasSubstr("gravac_compression_throughput_samples_per_second{job_name=\"default\","
                          "run_id=\"\",theta=\"10\"}"));
  }
  // A new controller in the same process, on the same metrics: the daemons re-join with the
  // epochs the first one published; it continues above them.
  auto c = Make(2, "dgc", "bf16");
  EXPECT_EQ(Value("gravac_joined_nodes"), 0);
  EXPECT_EQ(Value("gravac_world_size"), 0);
  EXPECT_EQ(Value("gravac_decision_epoch"), 0);
  EXPECT_EQ(Value("gravac_throughput_samples_per_second"), 0);
  EXPECT_THAT(Text(), Not(HasSubstr("gravac_compression_throughput_samples_per_second{")));
  EXPECT_EQ(Value("gravac_decisions_total"), first_epochs);
  EXPECT_EQ(Value("gravac_job_steps_total"), 12);
  for (int i = 0; i < 2; ++i) {
    JoinRequestInfo r = Node(i, 2);
    r.rejoin = true;
    r.node_rank = i;
    r.newest_epoch = first_epochs;
    r.last_step = 11;
    c->Join(r, [](absl::StatusOr<JoinReply> reply) { ASSERT_THAT(reply, IsOk()); });
  }
  ASSERT_TRUE(c->assembled());
  EXPECT_EQ(Value("gravac_decision_epoch"), first_epochs + 1);
  EXPECT_EQ(Value("gravac_decisions_total"), first_epochs + 1);
  // A step still run under the old controller's epoch is refused; newer ones count on.
  JobDecision old = c->Current();
  old.epoch = first_epochs;
  for (int n = 0; n < 2; ++n) ASSERT_THAT(c->ReportStats(Stats(n, 12, old)), IsOk());
  EXPECT_EQ(Rejected("old_epoch"), 1);
  Feed(*c, 2, 13, 16);
  EXPECT_EQ(Value("gravac_job_steps_total"), 15);
  EXPECT_EQ(Value("gravac_job_step_duration_seconds_count"), 15);
  EXPECT_EQ(Value("gravac_job_sent_bytes_total"), 16 * 200);
  // The info series of the new configuration replaces the old one.
  EXPECT_EQ(Value(absl::StrFormat(
                "gravac_controller_info{compressor=\"dgc\",policy=\"geometric\",sparse_values="
                "\"bf16\",version=\"%s\"}",
                GravacVersion())),
            1);
  int info_series = 0;
  for (const auto& [series, value] : Samples(Text())) {
    if (series.starts_with("gravac_controller_info{")) ++info_series;
  }
  EXPECT_EQ(info_series, 1);
}

// Two jobs on one registry: each job's series carry its job_name and run_id, move only with its
// own Coordinator, and go away when the job's observer does (the job was forgotten).
TEST_F(ControllerMetricsTest, EveryJobHasItsOwnSeries) {
  auto a = Make(2);  // the fixture's job "default"
  std::unique_ptr<CoordinatorObserver> other = metrics_->ForJob(JobId{"resnet", "r2"});
  ASSERT_OK_AND_ASSIGN(auto b, Coordinator::Create(Options(1, other.get())));
  Assemble(*a, 2);
  Assemble(*b, 1);
  Feed(*b, 1, 0, 5);
  const std::map<std::string, double> all = Samples(Text(), /*strip_job=*/false);
  auto value = [&](const std::string& series) {
    auto it = all.find(series);
    EXPECT_NE(it, all.end()) << "no series " << series << " in\n" << Text();
    return it == all.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(value("gravac_job_steps_total{job_name=\"resnet\",run_id=\"r2\"}"), 5);
  EXPECT_EQ(value("gravac_job_steps_total{job_name=\"default\",run_id=\"\"}"), 0);
  EXPECT_EQ(value("gravac_expected_nodes{job_name=\"resnet\",run_id=\"r2\"}"), 1);
  EXPECT_EQ(value("gravac_expected_nodes{job_name=\"default\",run_id=\"\"}"), 2);
  EXPECT_EQ(value("gravac_world_size{job_name=\"resnet\",run_id=\"r2\"}"), 2);
  b.reset();
  other.reset();
  EXPECT_THAT(Text(), Not(HasSubstr("job_name=\"resnet\"")));
  EXPECT_THAT(Text(), HasSubstr("gravac_job_steps_total{job_name=\"default\",run_id=\"\"} 0"));
}

TEST_F(ControllerMetricsTest, EveryFamilyHasHelpAndCountersEndInTotal) {
  auto c = Make(1);
  const std::string text = Text();
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    ASSERT_THAT(parts, SizeIs(4)) << line;
    if (!absl::StartsWith(parts[2], "gravac_")) continue;
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# HELP ", parts[2], " "))) << parts[2];
    if (parts[3] == "counter") {
      EXPECT_TRUE(absl::EndsWith(parts[2], "_total")) << parts[2];
    }
  }
}

}  // namespace
}  // namespace gravac::controller

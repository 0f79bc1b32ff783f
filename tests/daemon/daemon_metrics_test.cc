// DaemonMetrics (daemon/daemon_metrics.h): every gravacd family of the metrics contract, its
// labels and the semantics of each method, read back through SerializeMetrics; and the text
// passes `promtool check metrics` when promtool is installed.
#include "daemon/daemon_metrics.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "core/metrics.h"
#include "core/testing/status_matchers.h"
#include "daemon/engine/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/metrics_text.h"

namespace gravac::daemon {
namespace {

using ::testing::HasSubstr;
using testing::SeriesCount;
using testing::SeriesValue;

constexpr int64_t kBase = int64_t{1700000000} * 1000000000;  // some Unix time in ns
constexpr int64_t kMs = 1000000;

class DaemonMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = DaemonMetrics::Create(registry_, "n0", 4);
    ASSERT_THAT(m, IsOk());
    metrics_ = *std::move(m);
  }
  std::string Text() { return SerializeMetrics(registry_); }
  double Value(const std::string& name, testing::SeriesLabels labels = {}) {
    labels["node"] = "n0";
    return SeriesValue(Text(), name, labels);
  }

  prometheus::Registry registry_;
  std::unique_ptr<DaemonMetrics> metrics_;
};

TEST_F(DaemonMetricsTest, EveryFamilyExistsFromTheStartWithHelp) {
  const std::string text = Text();
  const char* families[] = {
      "gravac_node_info",
      "gravac_connected_workers",
      "gravac_expected_workers",
      "gravac_controller_connected",
      "gravac_peer_nodes",
      "gravac_applied_theta",
      "gravac_applied_decision_epoch",
      "gravac_decisions_received_total",
      "gravac_steps_total",
      "gravac_step_duration_seconds",
      "gravac_engine_phase_seconds_total",
      "gravac_collective_duration_seconds",
      "gravac_sent_bytes_total",
      "gravac_dense_equivalent_bytes_total",
      "gravac_saved_bytes_total",
      "gravac_compressed_tensors_total",
      "gravac_shm_handoff_duration_seconds",
      "gravac_stalls_total",
      "gravac_errors_total",
  };
  for (const char* f : families) {
    EXPECT_THAT(text, HasSubstr(std::string("# HELP ") + f + " ")) << f;
  }
  EXPECT_EQ(Value("gravac_expected_workers"), 4);
  EXPECT_EQ(Value("gravac_connected_workers"), 0);
  EXPECT_EQ(Value("gravac_controller_connected"), 0);
  EXPECT_EQ(Value("gravac_peer_nodes"), 0);
  EXPECT_EQ(Value("gravac_steps_total"), 0);
  EXPECT_EQ(Value("gravac_step_duration_seconds_count"), 0);
  for (const char* phase :
       {"negotiation", "compression", "exchange", "decompression", "local_reduce", "handoff"}) {
    EXPECT_EQ(Value("gravac_engine_phase_seconds_total", {{"phase", phase}}), 0) << phase;
  }
  for (const char* op :
       {"dense_allreduce", "sparse_allgather", "allgather", "broadcast", "negotiation"}) {
    EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", op}}), 0) << op;
  }
  EXPECT_EQ(SeriesCount(text, "gravac_collective_duration_seconds_count"), 5);
  EXPECT_EQ(Value("gravac_sent_bytes_total", {{"kind", "dense"}}), 0);
  EXPECT_EQ(Value("gravac_sent_bytes_total", {{"kind", "sparse"}}), 0);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "in"}}), 0);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "out"}}), 0);
  // Every status code but OK, so error rates exist before the first error.
  EXPECT_EQ(SeriesCount(text, "gravac_errors_total"), 16);
  for (const char* kind : {"cancelled", "invalid_argument", "deadline_exceeded",
                           "failed_precondition", "unavailable", "data_loss", "internal"}) {
    EXPECT_EQ(Value("gravac_errors_total", {{"kind", kind}}), 0) << kind;
  }
  // Buckets of the contract: step 0.001 * 2^i (16), collectives 0.0001 * 2^i (18).
  EXPECT_EQ(Value("gravac_step_duration_seconds_bucket", {{"le", "0.032"}}), 0);
  EXPECT_EQ(SeriesCount(text, "gravac_step_duration_seconds_bucket"), 17);  // + le="+Inf"
  EXPECT_EQ(SeriesCount(text, "gravac_collective_duration_seconds_bucket"), 5 * 19);
  EXPECT_EQ(SeriesCount(text, "gravac_shm_handoff_duration_seconds_bucket"), 2 * 21);
}

TEST_F(DaemonMetricsTest, NodeInfoGetsTheNodeRankOnceJoined) {
  EXPECT_THAT(Text(), HasSubstr("gravac_node_info{node=\"n0\",node_rank=\"\",version=\""));
  metrics_->SetJoined(2, 3);
  const std::string text = Text();
  EXPECT_EQ(SeriesCount(text, "gravac_node_info"), 1);
  EXPECT_THAT(text, HasSubstr("gravac_node_info{node=\"n0\",node_rank=\"2\",version=\""));
  EXPECT_EQ(Value("gravac_peer_nodes"), 3);
  metrics_->SetJoined(2, 3);  // again: still one series
  EXPECT_EQ(SeriesCount(Text(), "gravac_node_info"), 1);
}

TEST_F(DaemonMetricsTest, StepsBytesAndAppliedDecision) {
  NodeStepStats a;
  a.step_seconds = 0.003;
  a.bytes_sent = 100;
  a.bytes_dense = 400;
  a.theta_used = 10;
  a.decision_epoch = 2;
  metrics_->OnStepDone(a);
  NodeStepStats b;
  b.step_seconds = 0.5;
  b.bytes_sent = 500;  // more than dense: saves nothing, never negative
  b.bytes_dense = 400;
  b.theta_used = 1;
  b.decision_epoch = 3;
  metrics_->OnStepDone(b);
  EXPECT_EQ(Value("gravac_steps_total"), 2);
  EXPECT_EQ(Value("gravac_step_duration_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(Value("gravac_step_duration_seconds_sum"), 0.503);
  EXPECT_EQ(Value("gravac_step_duration_seconds_bucket", {{"le", "0.004"}}), 1);
  EXPECT_EQ(Value("gravac_step_duration_seconds_bucket", {{"le", "0.512"}}), 2);
  EXPECT_EQ(Value("gravac_dense_equivalent_bytes_total"), 800);
  EXPECT_EQ(Value("gravac_saved_bytes_total"), 300);
  EXPECT_EQ(Value("gravac_applied_theta"), 1);
  EXPECT_EQ(Value("gravac_applied_decision_epoch"), 3);
}

TEST_F(DaemonMetricsTest, GroupPhasesSplitAroundTheCollectives) {
  // A group from 0 to 10 ms with collectives at [2, 4] and [5, 7] ms.
  metrics_->ObserveCollective(CollectiveOp::kSparseAllgather, kBase + 2 * kMs, kBase + 4 * kMs);
  metrics_->ObserveCollective(CollectiveOp::kDenseAllreduce, kBase + 5 * kMs, kBase + 7 * kMs);
  metrics_->OnGroupDone(kBase, kBase + 10 * kMs);
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "compression"}}), 0.002, 1e-9);
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "exchange"}}), 0.004, 1e-9);
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "decompression"}}), 0.003,
              1e-9);
  // Negotiation collectives are not part of a group; a group without collectives is all
  // compression.
  metrics_->ObserveCollective(CollectiveOp::kNegotiation, kBase + 20 * kMs, kBase + 21 * kMs);
  metrics_->OnGroupDone(kBase + 30 * kMs, kBase + 31 * kMs);
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "compression"}}), 0.003, 1e-9);
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "exchange"}}), 0.004, 1e-9);
  EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", "negotiation"}}), 1);
  EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", "sparse_allgather"}}), 1);
  EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", "dense_allreduce"}}), 1);
  EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", "allgather"}}), 0);
  EXPECT_EQ(
      Value("gravac_collective_duration_seconds_bucket", {{"op", "negotiation"}, {"le", "0.0008"}}),
      0);
  EXPECT_EQ(
      Value("gravac_collective_duration_seconds_bucket", {{"op", "negotiation"}, {"le", "0.0016"}}),
      1);
  metrics_->AddPhase(EnginePhase::kNegotiation, 0.25);
  metrics_->AddPhase(EnginePhase::kNegotiation, -1);  // ignored: counters never decrease
  EXPECT_EQ(Value("gravac_engine_phase_seconds_total", {{"phase", "negotiation"}}), 0.25);
}

TEST_F(DaemonMetricsTest, TimedCollectiveRecordsAndPassesTheStatusThrough) {
  absl::Status s = TimedCollective(metrics_.get(), CollectiveOp::kBroadcast,
                                   [] { return absl::UnavailableError("peer gone"); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("peer gone")));
  EXPECT_EQ(Value("gravac_collective_duration_seconds_count", {{"op", "broadcast"}}), 1);
  int calls = 0;
  EXPECT_THAT(TimedCollective(nullptr, CollectiveOp::kBroadcast,
                              [&] {
                                ++calls;
                                return absl::OkStatus();
                              }),
              IsOk());
  EXPECT_EQ(calls, 1);
}

TEST_F(DaemonMetricsTest, BytesTensorsStallsErrorsAndGauges) {
  metrics_->AddSentBytes(BytesKind::kDense, 100);
  metrics_->AddSentBytes(BytesKind::kSparse, 40);
  metrics_->AddSentBytes(BytesKind::kSparse, -5);  // ignored
  metrics_->AddCompressedTensors(3);
  metrics_->OnStalls(2);
  metrics_->OnStalls(0);
  metrics_->OnError(absl::FailedPreconditionError("shape differs"));
  metrics_->OnError(absl::FailedPreconditionError("dtype differs"));
  metrics_->OnError(absl::UnavailableError("peer lost"));
  metrics_->OnError(absl::OkStatus());  // not an error
  metrics_->SetConnectedWorkers(3);
  metrics_->SetControllerConnected(true);
  metrics_->OnDecisionReceived();
  metrics_->OnDecisionReceived();
  metrics_->ObserveHandoff(HandoffDirection::kIn, 0.00002);
  metrics_->ObserveHandoff(HandoffDirection::kOut, 1.0);
  metrics_->ObserveHandoff(HandoffDirection::kOut, 2.0);
  EXPECT_EQ(Value("gravac_sent_bytes_total", {{"kind", "dense"}}), 100);
  EXPECT_EQ(Value("gravac_sent_bytes_total", {{"kind", "sparse"}}), 40);
  EXPECT_EQ(Value("gravac_compressed_tensors_total"), 3);
  EXPECT_EQ(Value("gravac_stalls_total"), 2);
  EXPECT_EQ(Value("gravac_errors_total", {{"kind", "failed_precondition"}}), 2);
  EXPECT_EQ(Value("gravac_errors_total", {{"kind", "unavailable"}}), 1);
  EXPECT_EQ(Value("gravac_errors_total", {{"kind", "internal"}}), 0);
  EXPECT_EQ(SeriesCount(Text(), "gravac_errors_total"), 16);
  EXPECT_EQ(Value("gravac_connected_workers"), 3);
  EXPECT_EQ(Value("gravac_controller_connected"), 1);
  EXPECT_EQ(Value("gravac_decisions_received_total"), 2);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "in"}}), 1);
  EXPECT_EQ(
      Value("gravac_shm_handoff_duration_seconds_bucket", {{"direction", "in"}, {"le", "2e-05"}}),
      1);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "out"}}), 2);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_sum", {{"direction", "out"}}), 3.0);
  metrics_->SetControllerConnected(false);
  EXPECT_EQ(Value("gravac_controller_connected"), 0);
}

TEST(DaemonMetricsCreateTest, OneRegistryPerNodeAndNoThrowOnConflicts) {
  prometheus::Registry registry;
  ASSERT_THAT(DaemonMetrics::Create(registry, "n0", 1), IsOk());
  // Same node again: the same families.
  ASSERT_THAT(DaemonMetrics::Create(registry, "n0", 1), IsOk());
  // Another node in the same registry: the families' constant labels differ (prometheus-cpp
  // throws; Create returns the error instead).
  EXPECT_THAT(DaemonMetrics::Create(registry, "n1", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'n1'")));
  prometheus::Registry other;
  prometheus::BuildGauge().Name("gravac_steps_total").Help("wrong type").Register(other);
  EXPECT_THAT(DaemonMetrics::Create(other, "n0", 1), StatusIs(absl::StatusCode::kInvalidArgument));
}

// gravacd --serve_jobs: each job's series carry job_name and run_id, count only that job's
// events, and go when the job's DaemonMetrics goes, while the other job's stay.
TEST(DaemonMetricsForJobTest, TwoJobsOnOneNodeReportApartAndTheEndedOneIsRemoved) {
  prometheus::Registry registry;
  ASSERT_OK_AND_ASSIGN(auto a, DaemonMetrics::CreateForJob(registry, "n0", {"train-a", "r1"}, 2));
  ASSERT_OK_AND_ASSIGN(auto b, DaemonMetrics::CreateForJob(registry, "n0", {"train-b", "r1"}, 1));
  const testing::SeriesLabels la = {{"node", "n0"}, {"job_name", "train-a"}, {"run_id", "r1"}};
  const testing::SeriesLabels lb = {{"node", "n0"}, {"job_name", "train-b"}, {"run_id", "r1"}};
  NodeStepStats s;
  s.step_seconds = 0.01;
  s.bytes_dense = 1000;
  s.bytes_sent = 100;
  s.theta_used = 10;
  a->OnStepDone(s);
  a->OnStepDone(s);
  s.theta_used = 40;
  s.bytes_sent = 25;
  b->OnStepDone(s);
  b->OnError(absl::DeadlineExceededError("x"));
  b->SetJoined(1, 2);
  std::string text = SerializeMetrics(registry);
  EXPECT_EQ(SeriesValue(text, "gravac_steps_total", la), 2);
  EXPECT_EQ(SeriesValue(text, "gravac_steps_total", lb), 1);
  EXPECT_EQ(SeriesValue(text, "gravac_saved_bytes_total", la), 1800);
  EXPECT_EQ(SeriesValue(text, "gravac_saved_bytes_total", lb), 975);
  EXPECT_EQ(SeriesValue(text, "gravac_applied_theta", la), 10);
  EXPECT_EQ(SeriesValue(text, "gravac_applied_theta", lb), 40);
  EXPECT_EQ(SeriesValue(text, "gravac_expected_workers", la), 2);
  testing::SeriesLabels kind = lb;
  kind["kind"] = "deadline_exceeded";
  EXPECT_EQ(SeriesValue(text, "gravac_errors_total", kind), 1);
  kind = la;
  kind["kind"] = "deadline_exceeded";
  EXPECT_EQ(SeriesValue(text, "gravac_errors_total", kind), 0);
  EXPECT_EQ(SeriesCount(text, "gravac_node_info"), 2);  // one per job; b's joined as node 1
  bool b_info = false;
  for (std::istringstream in(text); !b_info;) {
    std::string line;
    if (!std::getline(in, line)) break;
    b_info = line.rfind("gravac_node_info{", 0) == 0 &&
             line.find("job_name=\"train-b\"") != std::string::npos &&
             line.find("node_rank=\"1\"") != std::string::npos;
  }
  EXPECT_TRUE(b_info) << text;
  // No series without the job labels.
  EXPECT_TRUE(std::isnan(SeriesValue(text, "gravac_steps_total", {{"node", "n0"}})));
  const int steps_series = SeriesCount(text, "gravac_steps_total");
  EXPECT_EQ(steps_series, 2);

  a.reset();  // job a's retention passed
  text = SerializeMetrics(registry);
  EXPECT_TRUE(std::isnan(SeriesValue(text, "gravac_steps_total", la)));
  EXPECT_EQ(SeriesCount(text, "gravac_steps_total"), 1);
  EXPECT_EQ(SeriesValue(text, "gravac_steps_total", lb), 1);
  EXPECT_EQ(text.find("train-a"), std::string::npos) << text;
  b.reset();
  EXPECT_EQ(SerializeMetrics(registry).find("train-b"), std::string::npos);
  // A rerun of job a (a new DaemonMetrics) starts from zero.
  ASSERT_OK_AND_ASSIGN(a, DaemonMetrics::CreateForJob(registry, "n0", {"train-a", "r1"}, 2));
  EXPECT_EQ(SeriesValue(SerializeMetrics(registry), "gravac_steps_total", la), 0);
}

// The exposition passes Prometheus' own lint (counters end in _total, HELP present, units).
TEST_F(DaemonMetricsTest, PromtoolCheckMetricsPasses) {
  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "promtool not installed";
  NodeStepStats s;
  s.step_seconds = 0.01;
  metrics_->OnStepDone(s);
  metrics_->OnError(absl::DeadlineExceededError("slow"));
  metrics_->SetJoined(0, 2);
  const std::string path =
      ::testing::TempDir() + "/daemon_metrics_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream out(path);
    out << Text();
  }
  const std::string command = "/usr/bin/promtool check metrics < " + path + " 2>&1";
  std::FILE* p = popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  for (size_t got; (got = std::fread(buf, 1, sizeof(buf), p)) > 0;) output.append(buf, got);
  const int rc = pclose(p);
  std::remove(path.c_str());
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "") << output;
}

}  // namespace
}  // namespace gravac::daemon

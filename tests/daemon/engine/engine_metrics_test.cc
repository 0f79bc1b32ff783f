// The engine's metrics (EngineOptions::metrics, daemon/daemon_metrics.h): P in-process nodes, each
// with its own registry, run dense and compressed steps, collectives, a mismatch and a stall; the
// exact series are read back through SerializeMetrics.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/metrics.h"
#include "core/testing/status_matchers.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/engine/engine_harness.h"
#include "tests/daemon/metrics_text.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT

// One registry and DaemonMetrics per node ("n0", "n1", ...).
struct NodeMetrics {
  explicit NodeMetrics(int nodes) {
    for (int n = 0; n < nodes; ++n) {
      registries.push_back(std::make_unique<prometheus::Registry>());
      auto m = DaemonMetrics::Create(*registries.back(), "n" + std::to_string(n), 1);
      EXPECT_THAT(m, IsOk());
      metrics.push_back(*std::move(m));
    }
  }
  std::vector<DaemonMetrics*> pointers() const {
    std::vector<DaemonMetrics*> p;
    for (const auto& m : metrics) p.push_back(m.get());
    return p;
  }
  double Value(int node, const std::string& name, SeriesLabels labels = {}) const {
    labels["node"] = "n" + std::to_string(node);
    return SeriesValue(SerializeMetrics(*registries[node]), name, labels);
  }
  double Collectives(int node, const char* op) const {
    return Value(node, "gravac_collective_duration_seconds_count", {{"op", op}});
  }
  double Sent(int node, const char* kind) const {
    return Value(node, "gravac_sent_bytes_total", {{"kind", kind}});
  }
  double Phase(int node, const char* phase) const {
    return Value(node, "gravac_engine_phase_seconds_total", {{"phase", phase}});
  }

  std::vector<std::unique_ptr<prometheus::Registry>> registries;
  std::vector<std::unique_ptr<DaemonMetrics>> metrics;
};

EngineOptions Dense() {
  EngineOptions o;
  o.job.compressor = "none";
  return o;
}

TEST(EngineMetricsTest, DenseStepsCountStepsDenseBytesAndCollectives) {
  NodeMetrics m(2);
  Cluster c({1, 2}, Dense(), m.pointers());
  for (int step = 0; step < 3; ++step) {
    auto r = RunOnAll(c, [&](int n) {
      return Allreduce("w", std::vector<float>(256, 1.0f), /*compress=*/true, step);
    });
    for (const TensorResult& x : r) ASSERT_THAT(x.status, IsOk());
  }
  c.ShutdownAll();  // reports the last step
  for (int n = 0; n < 2; ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(m.Value(n, "gravac_steps_total"), 3);
    EXPECT_EQ(m.Value(n, "gravac_step_duration_seconds_count"), 3);
    // Ring allreduce over 2 nodes: each sends 2(P-1)/P = 1 x the 1024-byte buffer per step.
    EXPECT_EQ(m.Sent(n, "dense"), 3 * 1024);
    EXPECT_EQ(m.Sent(n, "sparse"), 0);
    EXPECT_EQ(m.Value(n, "gravac_dense_equivalent_bytes_total"), 3 * 1024);
    EXPECT_EQ(m.Value(n, "gravac_saved_bytes_total"), 0);
    EXPECT_EQ(m.Value(n, "gravac_compressed_tensors_total"), 0);
    EXPECT_EQ(m.Collectives(n, "dense_allreduce"), 3);
    EXPECT_EQ(m.Collectives(n, "sparse_allgather"), 0);
    EXPECT_GE(m.Collectives(n, "negotiation"), 3);
    EXPECT_EQ(m.Value(n, "gravac_applied_theta"), 1);
    EXPECT_EQ(m.Value(n, "gravac_applied_decision_epoch"), 0);
    EXPECT_EQ(m.Value(n, "gravac_errors_total", {{"kind", "failed_precondition"}}), 0);
    // The exchange phase is the data-plane collectives' time; negotiation ran too.
    EXPECT_GT(m.Phase(n, "exchange"), 0);
    EXPECT_NEAR(m.Phase(n, "exchange"),
                m.Value(n, "gravac_collective_duration_seconds_sum", {{"op", "dense_allreduce"}}),
                1e-9);
    EXPECT_GT(m.Phase(n, "negotiation"), 0);
    EXPECT_GT(m.Phase(n, "compression") + m.Phase(n, "decompression"), 0);
  }
}

TEST(EngineMetricsTest, CompressedStepsCountSparseBytesAndSavings) {
  NodeMetrics m(2);
  Cluster c({1, 1}, TopK(), m.pointers());  // decisions: θ = θ_c = 10
  std::mt19937 rng(3);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> g = {Gradient(rng, 1000), Gradient(rng, 1000)};
    auto r = RunOnAll(c, [&](int n) { return Allreduce("w", g[n], /*compress=*/true, step); });
    for (const TensorResult& x : r) {
      ASSERT_THAT(x.status, IsOk());
      ASSERT_EQ(x.collective, "sparse_allgather");
    }
  }
  c.ShutdownAll();
  for (int n = 0; n < 2; ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(m.Value(n, "gravac_steps_total"), 3);
    EXPECT_EQ(m.Sent(n, "dense"), 0);
    const double sparse = m.Sent(n, "sparse");
    EXPECT_GT(sparse, 0);
    EXPECT_EQ(m.Value(n, "gravac_dense_equivalent_bytes_total"), 3 * 4000);
    EXPECT_LT(sparse, 3 * 4000);
    EXPECT_GT(m.Value(n, "gravac_saved_bytes_total"), 0);
    EXPECT_EQ(m.Value(n, "gravac_saved_bytes_total"), 3 * 4000 - sparse);
    EXPECT_EQ(m.Value(n, "gravac_compressed_tensors_total"), 3);
    EXPECT_EQ(m.Collectives(n, "sparse_allgather"), 3);
    EXPECT_EQ(m.Collectives(n, "dense_allreduce"), 0);
    EXPECT_EQ(m.Value(n, "gravac_applied_theta"), 10);
    EXPECT_NEAR(m.Phase(n, "exchange"),
                m.Value(n, "gravac_collective_duration_seconds_sum", {{"op", "sparse_allgather"}}),
                1e-9);
  }
}

TEST(EngineMetricsTest, AllgatherAndBroadcastCountAsDenseBytes) {
  NodeMetrics m(2);
  Cluster c({1, 1}, Dense(), m.pointers());
  auto gathered = RunOnAll(c, [](int n) {
    NodeTensor t;
    t.spec.name = "g";
    t.spec.kind = CollectiveKind::kAllgather;
    t.spec.shape = {2, 3};
    t.first_dims = {2};
    t.data = Bytes(std::vector<float>(6, 1.0f));
    return t;
  });
  for (const TensorResult& x : gathered) ASSERT_THAT(x.status, IsOk());
  EXPECT_EQ(m.Sent(0, "dense"), m.Sent(1, "dense"));  // equal blocks: equal bytes
  EXPECT_GT(m.Sent(0, "dense"), 24);                  // the block and its framing
  auto broadcast = RunOnAll(c, [](int n) {
    NodeTensor t;
    t.spec.name = "b";
    t.spec.kind = CollectiveKind::kBroadcast;
    t.spec.root_rank = 0;
    t.spec.shape = {4};
    t.data = Bytes(std::vector<float>(4, n == 0 ? 2.0f : 0.0f));
    return t;
  });
  for (const TensorResult& x : broadcast) ASSERT_THAT(x.status, IsOk());
  // Only the root's node sends in a 2-node ring broadcast.
  EXPECT_EQ(m.Sent(0, "dense") - m.Sent(1, "dense"), 16);
  EXPECT_EQ(m.Sent(0, "sparse") + m.Sent(1, "sparse"), 0);
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(m.Collectives(n, "allgather"), 1);
    EXPECT_EQ(m.Collectives(n, "broadcast"), 1);
    EXPECT_EQ(m.Value(n, "gravac_steps_total"), 0);  // step -1: not part of a step
  }
}

TEST(EngineMetricsTest, MismatchCountsAnErrorOfItsKindOnEveryNode) {
  NodeMetrics m(2);
  Cluster c({1, 1}, Dense(), m.pointers());
  auto r = RunOnAll(
      c, [](int n) { return Allreduce("w", std::vector<float>(n == 0 ? 4 : 5, 1.0f), false, 0); });
  for (const TensorResult& x : r) {
    ASSERT_THAT(x.status, StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(m.Value(n, "gravac_errors_total", {{"kind", "failed_precondition"}}), 1);
    EXPECT_EQ(m.Value(n, "gravac_errors_total", {{"kind", "unavailable"}}), 0);
  }
  // A node's own failure reaches the others as unavailable.
  Pending waiting;
  c.engines[1]->Enqueue(Allreduce("v", {1.0f}, false, 1), waiting.callback());
  c.engines[0]->FailLocal(absl::UnavailableError("rank 0: worker disconnected"));
  EXPECT_THAT(waiting.Get().status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(m.Value(1, "gravac_errors_total", {{"kind", "unavailable"}}), 1);
}

TEST(EngineMetricsTest, StallWarningsAreCounted) {
  NodeMetrics m(2);
  ManualClock clock;
  EngineOptions o = Dense();
  o.clock = &clock;
  o.stall_warning = absl::Milliseconds(200);
  Cluster c({1, 1}, o, m.pointers());
  Pending p0, p1;
  c.engines[0]->Enqueue(Allreduce("slow", {1.0f}, false, 0), p0.callback());
  EXPECT_FALSE(p0.Ready(absl::Milliseconds(20)));
  EXPECT_EQ(m.Value(0, "gravac_stalls_total"), 0);  // no clock time passed
  const absl::Duration moved = AdvanceUntil(clock, absl::Milliseconds(20), [&] {
    return m.Value(0, "gravac_stalls_total") >= 1 && m.Value(1, "gravac_stalls_total") >= 1;
  });
  EXPECT_GE(moved, absl::Milliseconds(200));
  EXPECT_GE(m.Value(0, "gravac_stalls_total"), 1);
  EXPECT_GE(m.Value(1, "gravac_stalls_total"), 1);
  c.engines[1]->Enqueue(Allreduce("slow", {2.0f}, false, 0), p1.callback());
  EXPECT_THAT(p0.Get().status, IsOk());
  EXPECT_THAT(p1.Get().status, IsOk());
}

}  // namespace
}  // namespace gravac::daemon

// WorkerServer's metrics (WorkerServerOptions::metrics): connected workers up and down, the
// shared-memory handoff histograms in and out, local reduce and handoff phases, local stalls and
// tensors failed on the local side; read back through SerializeMetrics.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/ipc/framing.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "core/metrics.h"
#include "core/testing/status_matchers.h"
#include "daemon/daemon_metrics.h"
#include "daemon/local/worker_server.h"
#include "gmock/gmock.h"
#include "gravac/gravac.h"
#include "gravac/v1/worker.pb.h"
#include "gtest/gtest.h"
#include "tests/daemon/local/fake_engine.h"
#include "tests/daemon/local/raw_worker.h"
#include "tests/daemon/local/test_workers.h"
#include "tests/daemon/metrics_text.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT

class WorkerServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = DaemonMetrics::Create(registry_, "n0", 2);
    ASSERT_THAT(m, IsOk());
    metrics_ = *std::move(m);
  }
  std::unique_ptr<WorkerServer> Start(int local_size, absl::Duration stall = absl::Seconds(60)) {
    WorkerServerOptions o;
    o.socket_path = dir_.socket();
    o.local_size = local_size;
    o.stall_warning = stall;
    o.metrics = metrics_.get();
    auto server = WorkerServer::Start(o);
    EXPECT_THAT(server, IsOk());
    return server.ok() ? std::move(*server) : nullptr;
  }
  double Value(const std::string& name, SeriesLabels labels = {}) {
    labels["node"] = "n0";
    return SeriesValue(SerializeMetrics(registry_), name, labels);
  }
  // Polls (bounded) until `name` reads `want`; returns the last value.
  double AwaitValue(const std::string& name, double want) {
    double v = Value(name);
    for (int i = 0; i < 200 && v != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      v = Value(name);
    }
    return v;
  }

  TempDir dir_;
  prometheus::Registry registry_;
  std::unique_ptr<DaemonMetrics> metrics_;
};

TEST_F(WorkerServerMetricsTest, ConnectedWorkersAndHandoffsInAndOut) {
  auto server = Start(2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  EXPECT_EQ(Value("gravac_connected_workers"), 0);
  std::atomic<int> entered{0};
  std::atomic<bool> checked{false};
  RunWorkers(dir_.socket(), 2, 0, 2, [&](int lr, gravac_context* ctx) {
    // Both are connected once both inits returned (the welcome follows the count).
    ++entered;
    while (entered < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (lr == 0) {
      EXPECT_EQ(Value("gravac_connected_workers"), 2);
      checked = true;
    }
    while (!checked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 0; i < 3; ++i) {
      std::vector<float> buf(1000, 1.0f);
      const int64_t shape[] = {1000};
      gravac_request* req = nullptr;
      ASSERT_EQ(
          gravac_allreduce_async(ctx, ("t" + std::to_string(i)).c_str(), buf.data(), buf.data(),
                                 shape, 1, GRAVAC_FLOAT32, GRAVAC_SUM, nullptr, &req),
          GRAVAC_OK);
      ASSERT_EQ(gravac_wait(req), GRAVAC_OK) << gravac_request_error(req);
      gravac_request_free(req);
    }
  });
  // The workers shut down and closed their connections.
  EXPECT_EQ(AwaitValue("gravac_connected_workers", 0), 0);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "in"}}), 3);
  EXPECT_EQ(Value("gravac_shm_handoff_duration_seconds_count", {{"direction", "out"}}), 3);
  EXPECT_GT(Value("gravac_shm_handoff_duration_seconds_sum", {{"direction", "in"}}), 0);
  EXPECT_GT(Value("gravac_shm_handoff_duration_seconds_sum", {{"direction", "out"}}), 0);
  EXPECT_GT(Value("gravac_engine_phase_seconds_total", {{"phase", "local_reduce"}}), 0);
  // handoff = in - local reduce + out
  EXPECT_NEAR(Value("gravac_engine_phase_seconds_total", {{"phase", "handoff"}}),
              Value("gravac_shm_handoff_duration_seconds_sum", {{"direction", "in"}}) +
                  Value("gravac_shm_handoff_duration_seconds_sum", {{"direction", "out"}}) -
                  Value("gravac_engine_phase_seconds_total", {{"phase", "local_reduce"}}),
              1e-6);
  EXPECT_EQ(Value("gravac_stalls_total"), 0);
}

TEST_F(WorkerServerMetricsTest, LocalStallIsCounted) {
  auto server = Start(2, absl::Milliseconds(100));
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  RunWorkers(dir_.socket(), 2, 0, 2, [&](int lr, gravac_context* ctx) {
    float v = 1.0f;
    if (lr == 1) {  // posts late, once the stall was counted (bounded wait)
      for (int i = 0; i < 200 && Value("gravac_stalls_total") < 1; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    gravac_request* req = nullptr;
    ASSERT_EQ(gravac_allreduce_async(ctx, "late", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                     nullptr, &req),
              GRAVAC_OK);
    EXPECT_EQ(gravac_wait(req), GRAVAC_OK);
    gravac_request_free(req);
  });
  EXPECT_GE(Value("gravac_stalls_total"), 1);
}

TEST_F(WorkerServerMetricsTest, TensorsFailedLocallyAreCountedByKind) {
  auto server = Start(2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  // Local rank 1 connects and dies without shutdown while local rank 0 waits on a tensor.
  auto raw = std::make_unique<RawWorker>();
  ASSERT_THAT(raw->Join(dir_.socket(), 1, 2, 1, 2), IsOk());
  gravac_config c0 = MakeConfig(dir_.socket(), 0, 2, 0, 2);
  gravac_context* ctx0 = nullptr;
  ASSERT_EQ(gravac_init_with_config(&c0, &ctx0, nullptr, 0), GRAVAC_OK);
  EXPECT_EQ(AwaitValue("gravac_connected_workers", 2), 2);
  float v = 1.0f;
  gravac_request* req = nullptr;
  ASSERT_EQ(gravac_allreduce_async(ctx0, "t", &v, &v, nullptr, 0, GRAVAC_FLOAT32, GRAVAC_SUM,
                                   nullptr, &req),
            GRAVAC_OK);
  raw.reset();  // closes its connection without shutdown
  EXPECT_EQ(gravac_wait(req), GRAVAC_ERR_UNAVAILABLE);
  gravac_request_free(req);
  EXPECT_EQ(AwaitValue("gravac_connected_workers", 1), 1);
  EXPECT_EQ(Value("gravac_errors_total", {{"kind", "unavailable"}}), 1);
  EXPECT_EQ(gravac_shutdown(ctx0), GRAVAC_OK);
  EXPECT_EQ(AwaitValue("gravac_connected_workers", 0), 0);
}

}  // namespace
}  // namespace gravac::daemon

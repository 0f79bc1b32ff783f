// FakeDaemonTest: a gtest fixture running a real WorkerServer on a temporary socket over a
// FakeEngine, for tests that drive it through the client library's C API (RunWorkers).
//
// Thread-safety: one test thread; the workers RunWorkers starts are joined before it returns.
#ifndef GRAVAC_TESTS_DAEMON_LOCAL_FAKE_DAEMON_FIXTURE_H_
#define GRAVAC_TESTS_DAEMON_LOCAL_FAKE_DAEMON_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "daemon/local/worker_server.h"
#include "gtest/gtest.h"
#include "tests/daemon/local/fake_engine.h"
#include "tests/daemon/local/test_workers.h"

namespace gravac::daemon::testing {

class FakeDaemonTest : public ::testing::Test {
 protected:
  // Starts the daemon's local side for `local_size` workers, serving engine_.
  void StartDaemon(int local_size) {
    engine_ = std::make_unique<FakeEngine>(local_size);
    WorkerServerOptions o;
    o.socket_path = dir_.socket();
    o.local_size = local_size;
    auto server = WorkerServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Serve(engine_->Sink(), engine_->OnFailure());
  }
  // fn(local_rank, ctx) on `n` workers of a job of `n` (RunWorkers).
  void Run(int n, const std::function<void(int, gravac_context*)>& fn, int64_t staging = 0,
           bool shutdown = true) {
    RunWorkers(dir_.socket(), n, 0, n, fn, staging, shutdown);
  }

  TempDir dir_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<WorkerServer> server_;
};

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_LOCAL_FAKE_DAEMON_FIXTURE_H_

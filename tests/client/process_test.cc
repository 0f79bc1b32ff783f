// Workers as real processes (tests/client/c_worker.c, plain C over libgravac.so, configured by
// the GRAVAC_* environment) against an in-process WorkerServer; one of them killed with SIGKILL.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "core/testing/status_matchers.h"
#include "daemon/local/worker_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/local/fake_engine.h"
#include "tests/daemon/local/test_workers.h"

extern char** environ;

namespace gravac {
namespace {

using ::gravac::daemon::testing::FakeEngine;
using ::gravac::daemon::testing::TempDir;
using ::testing::HasSubstr;

pid_t Spawn(const std::string& mode, const std::string& socket, int rank, int size,
            int local_rank, int local_size) {
  std::vector<std::string> env = {
      "GRAVAC_RANK=" + std::to_string(rank),
      "GRAVAC_SIZE=" + std::to_string(size),
      "GRAVAC_LOCAL_RANK=" + std::to_string(local_rank),
      "GRAVAC_LOCAL_SIZE=" + std::to_string(local_size),
      "GRAVAC_DAEMON_SOCKET=" + socket,
      "GRAVAC_CONNECT_TIMEOUT_S=10",
  };
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string path = GRAVAC_TEST_C_WORKER;
  char* argv[] = {path.data(), const_cast<char*>(mode.c_str()), nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

// Exit code of `pid`, waiting at most `timeout` (then kills it and returns -1).
int WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

std::unique_ptr<daemon::WorkerServer> Start(const TempDir& dir, int local_size) {
  daemon::WorkerServerOptions o;
  o.socket_path = dir.socket();
  o.local_size = local_size;
  auto s = daemon::WorkerServer::Start(o);
  EXPECT_THAT(s, IsOk());
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(ProcessTest, CWorkersAllreduceThroughTheEnvironment) {
  TempDir dir;
  auto server = Start(dir, 3);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(3);
  server->Serve(engine.Sink(), engine.OnFailure());
  std::vector<pid_t> pids;
  for (int lr = 0; lr < 3; ++lr) pids.push_back(Spawn("allreduce", dir.socket(), lr, 3, lr, 3));
  for (pid_t p : pids) {
    ASSERT_GT(p, 0);
    EXPECT_EQ(WaitExit(p, absl::Seconds(60)), 0);
  }
  EXPECT_THAT(server->WaitForShutdown(absl::Seconds(10)), IsOk());
  ASSERT_EQ(engine.specs().size(), 1u);
  EXPECT_EQ(engine.specs()[0].samples, 24);
}

TEST(ProcessTest, KilledWorkerGivesTheOtherAnErrorNotAHang) {
  TempDir dir;
  auto server = Start(dir, 2);
  ASSERT_NE(server, nullptr);
  FakeEngine engine(2);
  server->Serve(engine.Sink(), engine.OnFailure());
  pid_t idle = Spawn("idle", dir.socket(), 1, 2, 1, 2);
  ASSERT_GT(idle, 0);
  pid_t waiting = Spawn("expect_fail", dir.socket(), 0, 2, 0, 2);
  ASSERT_GT(waiting, 0);
  ASSERT_THAT(server->WaitForWorkers(absl::Seconds(30)), IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let rank 0 post
  ::kill(idle, SIGKILL);
  EXPECT_EQ(WaitExit(idle, absl::Seconds(10)), 128 + SIGKILL);
  EXPECT_EQ(WaitExit(waiting, absl::Seconds(30)), 3);  // got UNAVAILABLE naming rank 1
  ASSERT_EQ(engine.failures().size(), 1u);
  EXPECT_THAT(engine.failures()[0],
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker rank 1")));
}

}  // namespace
}  // namespace gravac

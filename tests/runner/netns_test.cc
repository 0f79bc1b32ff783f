// gravacrun --link (rate only: netem is missing on some kernels): every node in its own shaped
// namespace (controller in node 0, each daemon and its workers in their node), and no namespace
// left afterwards — after a normal end, after SIGINT and after gravacrun itself is killed (netemu's
// guardian). Needs root; skips otherwise.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/process.h"
#include "tests/runner/cli_helpers.h"
#include "tests/runner/fake_job.h"

namespace gravac::runner {
namespace {

using ::gravac::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class GravacrunNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    const std::string probe = absl::StrCat("gvcprobe-run-", getpid());
    if (!netemu::RunChecked({"ip", "netns", "add", probe}).ok()) {
      GTEST_SKIP() << "no network namespaces here";
    }
    ASSERT_TRUE(netemu::RunChecked({"ip", "netns", "del", probe}).ok());
    ASSERT_OK_AND_ASSIGN(job_, FakeJob::Create());
  }

  std::vector<std::string> LinkArgs(int np, int nodes, const std::vector<std::string>& command) {
    std::vector<std::string> args = FakeJobArgs(job_, np, nodes, command);
    args.insert(args.begin() + 1, {"--link", "1gbit", "--kill_grace_s", "1"});
    return args;
  }

  // Namespaces made by the gravacrun process `pid` (cluster names carry the creator's pid).
  static std::vector<std::string> NamespacesOf(pid_t pid) {
    std::vector<std::string> mine;
    absl::StatusOr<std::vector<std::string>> all = netemu::ListNamespaces();
    if (!all.ok()) return {"<ip netns list failed>"};
    for (const std::string& ns : *all) {
      if (absl::StartsWith(ns, absl::StrCat("gravacrun-", pid, "-"))) mine.push_back(ns);
    }
    return mine;
  }

  static bool NoNamespacesWithin(pid_t pid, absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    while (!NamespacesOf(pid).empty()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  FakeJob job_;
};

TEST_F(GravacrunNetnsTest, NodesRunInTheirOwnNamespaces) {
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(LinkArgs(3, 2, {"sh", "-c", "ip -4 -o addr show dev eth0"}),
                             {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  const pid_t pid = run.pid();
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(60)));
  ASSERT_EQ(r.status.exit_code, 0) << r.err;
  // Node 0 holds ranks 0-1 and the controller, node 1 rank 2; host byte = node + 1.
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 0\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.1/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 1\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.1/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[rank 2\\] [^\n]*eth0 +inet 198\\.1[89]\\.[0-9]+\\.2/24.*"));
  EXPECT_THAT(r.out, MatchesRegex(".*\\[controller\\] controller --listen=198\\.1[89]\\.[0-9]+"
                                  "\\.1:0 .*"));
  EXPECT_THAT(r.out, HasSubstr("--ucx_tls=tcp --ucx_net_devices=eth0"));
  EXPECT_THAT(r.err, HasSubstr("ip netns exec gravacrun-"));
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(10)));
}

TEST_F(GravacrunNetnsTest, SigintRemovesProcessesAndNamespaces) {
  const std::string pids = job_.Path("pids");
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(
          LinkArgs(2, 2, {"sh", "-c", absl::StrCat("echo $$ >> ", pids, "; exec sleep 100")}),
          {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  const pid_t pid = run.pid();
  std::vector<pid_t> workers;
  ASSERT_TRUE(WaitForLines(pids, 2, absl::Seconds(30), &workers));
  EXPECT_FALSE(NamespacesOf(pid).empty());
  ASSERT_THAT(run.Signal(SIGINT), IsOk());
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(30)));
  EXPECT_EQ(r.status.exit_code, 128 + SIGINT) << r.err;
  for (pid_t w : workers) EXPECT_TRUE(GoneWithin(w, absl::Seconds(5))) << w;
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(10)));
}

TEST_F(GravacrunNetnsTest, GuardianRemovesNamespacesWhenGravacrunIsKilled) {
  const std::string pids = job_.Path("pids");
  ASSERT_OK_AND_ASSIGN(
      netemu::Process run,
      netemu::Process::Spawn(
          LinkArgs(2, 2, {"sh", "-c", absl::StrCat("echo $$ >> ", pids, "; exec sleep 100")}),
          {.netns = "", .env = {}, .output = netemu::OutputMode::kNull}));
  const pid_t pid = run.pid();
  std::vector<pid_t> workers;
  ASSERT_TRUE(WaitForLines(pids, 2, absl::Seconds(30), &workers));
  ASSERT_THAT(run.Kill().status(), IsOk());
  for (pid_t w : workers) EXPECT_TRUE(GoneWithin(w, absl::Seconds(10))) << w;
  EXPECT_TRUE(NoNamespacesWithin(pid, absl::Seconds(15)));
}

}  // namespace
}  // namespace gravac::runner

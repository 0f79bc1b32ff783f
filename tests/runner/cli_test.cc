// Drives the gravacrun binary (path in GRAVACRUN_BIN) with stand-in controller and daemon
// scripts: usage errors, exit codes, and teardown on SIGINT (no process left behind).
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/process.h"
#include "tests/runner/cli_helpers.h"
#include "tests/runner/fake_job.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;

TEST(GravacrunCliTest, UsageErrorsExit2) {
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, netemu::RunCommand({GRAVACRUN_BIN, "-np", "2"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no worker command after \"--\""));
  ASSERT_OK_AND_ASSIGN(
      r, netemu::RunCommand({GRAVACRUN_BIN, "-np", "1", "--nodes", "2", "--", "true"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--nodes must be 1..1"));
  ASSERT_OK_AND_ASSIGN(r, netemu::RunCommand({GRAVACRUN_BIN, "--help"}));
  EXPECT_EQ(r.status.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("usage: gravacrun -np N"));
}

// horovodrun's command line: -H on this machine, mapped flags, -x, no "--" before the command.
TEST(GravacrunCliTest, RunsAHorovodrunCommandLine) {
  ASSERT_OK_AND_ASSIGN(FakeJob job, FakeJob::Create());
  std::vector<std::string> args = {GRAVACRUN_BIN, "-np", "2", "-H", "localhost:1,127.0.0.1:1",
                                   "--fusion-threshold-mb", "2", "--gloo", "-x",
                                   "GREETING=hello there", "--gravacd_path",
                                   job.Path("daemon.sh"), "--controller_path",
                                   job.Path("controller.sh"), "--run_dir", job.Path("run"),
                                   "--exit_grace_s", "0.3", "sh", "-c",
                                   "echo \"$GREETING from $GRAVAC_RANK of $GRAVAC_SIZE\""};
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, netemu::RunCommand(args));
  EXPECT_EQ(r.status.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] hello there from 0 of 2\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 1] hello there from 1 of 2\n"));
  EXPECT_THAT(r.out, HasSubstr("--fusion_threshold_bytes=2097152"));  // the stand-in daemons
  EXPECT_THAT(r.err, HasSubstr("--gloo: accepted, nothing to do"));
}

TEST(GravacrunCliTest, RefusedHorovodrunFlagsExit2NamingThem) {
  ASSERT_OK_AND_ASSIGN(
      netemu::CommandResult r,
      netemu::RunCommand({GRAVACRUN_BIN, "-np", "2", "--timeline-mark-cycles", "python3", "t.py"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("horovodrun flag --timeline-mark-cycles is not supported"));
  // Hosts are gravacrun's own (ssh_netns_test.cc runs them); a bad list is refused up front.
  ASSERT_OK_AND_ASSIGN(r, netemu::RunCommand({GRAVACRUN_BIN, "-np", "2", "-H",
                                              "elsewhere.example:two", "python3", "t.py"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("host 'elsewhere.example' has slots 'two'"));
}

TEST(GravacrunCliTest, MissingDaemonBinaryIsNamed) {
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                       netemu::RunCommand({GRAVACRUN_BIN, "-np", "1", "--gravacd_path",
                                           "/nonexistent/gravacd", "--", "true"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/gravacd"));
}

TEST(GravacrunCliTest, ReturnsTheFailingWorkersCode) {
  ASSERT_OK_AND_ASSIGN(FakeJob job, FakeJob::Create());
  ASSERT_OK_AND_ASSIGN(
      netemu::CommandResult r,
      netemu::RunCommand(FakeJobArgs(
          job, 3, 1,
          {"sh", "-c", "echo hi; if [ $GRAVAC_RANK = 1 ]; then exit 9; fi; exec sleep 100"})));
  EXPECT_EQ(r.status.exit_code, 9) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 1] hi\n"));  // printed before it failed
}

TEST(GravacrunCliTest, SigintTearsEverythingDown) {
  ASSERT_OK_AND_ASSIGN(FakeJob job, FakeJob::Create());
  const std::string pids = job.Path("pids");
  ASSERT_THAT(job.WriteController(absl::StrCat("echo $$ >> ", pids, "; echo ", FakeJob::kPort,
                                               " > \"$port_file\"; write_metrics_port ",
                                               FakeJob::kMetricsPort, "; exec sleep 600")),
              IsOk());
  ASSERT_THAT(job.WriteDaemon(absl::StrCat("echo $$ >> ", pids, "; exec sleep 600")), IsOk());
  // Rank 1 ignores SIGINT and SIGTERM (so do the processes it starts): SIGKILL must get it.
  std::vector<std::string> args = FakeJobArgs(
      job, 4, 2,
      {"sh", "-c",
       absl::StrCat("if [ $GRAVAC_RANK = 1 ]; then trap '' INT TERM; fi; sleep 100 & echo $! >> ",
                    pids, "; echo $$ >> ", pids, "; wait")});
  args.insert(args.begin() + 1, {"--kill_grace_s", "1"});
  ASSERT_OK_AND_ASSIGN(netemu::Process run,
                       netemu::Process::Spawn(
                           args, {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  // 1 controller + 2 daemons + 4 workers with one sleep each.
  std::vector<pid_t> started;
  ASSERT_TRUE(WaitForLines(pids, 11, absl::Seconds(20), &started)) << job.Read("pids");
  ASSERT_THAT(run.Signal(SIGINT), IsOk());
  const absl::Time sent = absl::Now();
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, run.Collect(absl::Seconds(20)));
  EXPECT_LT(absl::Now() - sent, absl::Seconds(8));
  EXPECT_EQ(r.status.exit_code, 128 + SIGINT) << r.err;
  EXPECT_THAT(r.err, HasSubstr("forwarding it to the job"));
  for (pid_t pid : started) EXPECT_TRUE(GoneWithin(pid, absl::Seconds(5))) << pid;
}

}  // namespace
}  // namespace gravac::runner

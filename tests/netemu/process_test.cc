#include "netemu/process.h"

#include <signal.h>
#include <sys/wait.h>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::netemu {
namespace {

using ::testing::HasSubstr;

TEST(ProcessTest, RunCheckedReturnsStdout) {
  ASSERT_OK_AND_ASSIGN(std::string out, RunChecked({"sh", "-c", "echo out; echo err >&2"}));
  EXPECT_EQ(out, "out\n");
}

TEST(ProcessTest, RunCommandKeepsBothStreamsAndExitCode) {
  ASSERT_OK_AND_ASSIGN(CommandResult r, RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}));
  EXPECT_EQ(r.status.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(ProcessTest, FailureMessageHasCommandExitAndStderr) {
  EXPECT_THAT(RunChecked({"sh", "-c", "echo 'no such device' >&2; exit 2"}),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::AllOf(HasSubstr("sh -c"), HasSubstr("exit code 2"),
                                        HasSubstr("no such device"))));
}

TEST(ProcessTest, EnvironmentOverrides) {
  ASSERT_OK_AND_ASSIGN(std::string out,
                       RunChecked({"sh", "-c", "echo $GRAVAC_NETEMU_TEST_VAR"},
                                  {.netns = "", .env = {{"GRAVAC_NETEMU_TEST_VAR", "value 1"}}}));
  EXPECT_EQ(out, "value 1\n");
}

TEST(ProcessTest, LargeOutputOnBothStreamsDoesNotDeadlock) {
  // 1 MiB on each stream is far beyond a pipe's buffer: both must be drained concurrently.
  ASSERT_OK_AND_ASSIGN(
      CommandResult r,
      RunCommand({"sh", "-c", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2"}));
  EXPECT_EQ(r.out.size(), 1048576u);
  EXPECT_EQ(r.err.size(), 1048576u);
}

TEST(ProcessTest, TimeoutKillsTheCommand) {
  absl::Time start = absl::Now();
  EXPECT_THAT(
      RunCommand({"sleep", "30"}, {.netns = "", .env = {}, .timeout = absl::Milliseconds(200)}),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("sleep 30")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ProcessTest, ExecFailureIsExitCode127) {
  ASSERT_OK_AND_ASSIGN(CommandResult r, RunCommand({"/nonexistent/gravac-no-such-program"}));
  EXPECT_EQ(r.status.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("exec failed"));
}

TEST(ProcessTest, EmptyArgvIsInvalid) {
  EXPECT_THAT(Process::Spawn({}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ProcessTest, WaitTimesOutThenKillReportsTheSignal) {
  ASSERT_OK_AND_ASSIGN(Process p, Process::Spawn({"sleep", "30"}));
  EXPECT_TRUE(p.running());
  EXPECT_THAT(p.Wait(absl::Milliseconds(50)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_OK_AND_ASSIGN(ExitStatus status, p.Kill());
  EXPECT_EQ(status.term_signal, SIGKILL);
  EXPECT_FALSE(p.running());
}

TEST(ProcessTest, DestructorKillsTheChild) {
  pid_t pid = -1;
  {
    ASSERT_OK_AND_ASSIGN(Process p, Process::Spawn({"sleep", "30"}));
    pid = p.pid();
    Process moved = std::move(p);
    EXPECT_FALSE(p.running());
    EXPECT_EQ(moved.pid(), pid);
  }
  // Reaped by the destructor: the pid no longer names a child of ours.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace gravac::netemu

// The ssh command line, and the remote wrapper run for real through a local `sh -c` (what sshd
// would run): exit codes, exported variables, a missing program, the ready line, files sent on its
// stdin (private, removed at the end), and the teardown when its stdin (the ssh channel) closes. tests/runner/ssh_netns_test.cc runs it over real ssh.
#include "runner/ssh_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/process.h"
#include "tests/runner/cli_helpers.h"

namespace gravac::runner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gravac_ssh_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs the remote command of `command` through `sh -c` here, stdin a pipe whose write end is
// returned in *stdin_writer (-1: closed at once is not wanted, so it stays open until the caller
// closes it).
absl::StatusOr<netemu::Process> RunWrapper(const RemoteCommand& command, int* stdin_writer) {
  std::vector<std::string> argv = SshArgv({}, command);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
  absl::StatusOr<netemu::Process> p = netemu::Process::Spawn(
      {"sh", "-c", argv.back()},
      {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture, .stdin_fd = fds[0]});
  close(fds[0]);
  *stdin_writer = fds[1];
  return p;
}

// Runs the wrapper of `command` to its end (bounded, 20 s), its stdin held open meanwhile.
absl::StatusOr<netemu::CommandResult> RunWrapperToEnd(const RemoteCommand& command) {
  int writer = -1;
  absl::StatusOr<netemu::Process> p = RunWrapper(command, &writer);
  if (!p.ok()) return p.status();
  absl::StatusOr<netemu::CommandResult> r = p->Collect(absl::Seconds(20));
  close(writer);
  return r;
}

RemoteCommand Command(std::string host, std::vector<std::string> argv) {
  RemoteCommand c;
  c.host = std::move(host);
  c.argv = std::move(argv);
  return c;
}

pid_t ReadPid(const std::string& path, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    int pid = 0;
    if (in >> pid && pid > 0) return pid;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

TEST(SshLaunchTest, QuotesForAPosixShell) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
  const std::string nasty = "a b'c\"d$HOME`x`\\n;|&*";
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                       netemu::RunCommand({"sh", "-c", absl::StrCat("printf %s ", ShellQuote(nasty))}, {}));
  EXPECT_EQ(r.out, nasty);
}

TEST(SshLaunchTest, SshCommandLine) {
  SshOptions ssh{.port = 2222,
                 .identity_file = "/keys/id",
                 .options = {"-o", "StrictHostKeyChecking=no"},
                 .connect_timeout = absl::Milliseconds(2500)};
  std::vector<std::string> argv = SshArgv(ssh, Command("node-1", {"gravacd"}));
  ASSERT_GE(argv.size(), 12u);
  // The user's options come first: ssh keeps the first value it gets for an option.
  EXPECT_THAT(std::vector<std::string>(argv.begin(), argv.end() - 2),
              ElementsAre("ssh", "-o", "StrictHostKeyChecking=no", "-T", "-o", "BatchMode=yes",
                          "-o", "ConnectTimeout=3", "-p", "2222", "-i", "/keys/id"));
  EXPECT_EQ(argv[argv.size() - 2], "node-1");
  EXPECT_THAT(argv.back(), HasSubstr("'gravacd'"));
  argv = SshArgv({}, Command("h", {"w"}));
  EXPECT_THAT(argv, Not(::testing::Contains("-p")));
  EXPECT_THAT(argv, Not(::testing::Contains("-i")));
}

TEST(SshLaunchTest, ReadyLinesAreTakenOutOfTheOutput) {
  std::string text =
      "[gravacd 1] starting\n[gravacd 1] @gravacrun-ready 4321\n[gravacd 1] listening\n";
  std::vector<int> values;
  EXPECT_TRUE(TakeReadyLine(&text, "[gravacd 1] ", &values));
  EXPECT_EQ(text, "[gravacd 1] starting\n[gravacd 1] listening\n");
  EXPECT_THAT(values, ElementsAre(4321));
  text = "[gravacd 1] a worker said [gravacd 1] @gravacrun-ready 1\n";  // not at a line's start
  EXPECT_FALSE(TakeReadyLine(&text, "[gravacd 1] ", &values));
  text = "[gravacd 2] @gravacrun-ready\n";
  EXPECT_TRUE(TakeReadyLine(&text, "[gravacd 2] ", &values));
  EXPECT_TRUE(values.empty());
  EXPECT_EQ(text, "");
}

TEST(SshLaunchTest, HostPortBracketsIpv6) {
  EXPECT_EQ(HostPort("10.0.0.1", 80), "10.0.0.1:80");
  EXPECT_EQ(HostPort("node-1", 80), "node-1:80");
  EXPECT_EQ(HostPort("fe80::1", 80), "[fe80::1]:80");
  EXPECT_EQ(HostPort("[::1]", 80), "[::1]:80");
}

TEST(SshLaunchTest, WrapperPassesExitCodeAndVariables) {
  RemoteCommand c = Command("h1", {"sh", "-c", "echo \"$A|$B\"; echo to-stderr >&2; exit 3"});
  c.env = {{"A", "x y"}, {"B", "it's $HOME"}};
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, RunWrapperToEnd(c));
  EXPECT_EQ(r.status.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "x y|it's $HOME\n");
  EXPECT_EQ(r.err, "to-stderr\n");
}

TEST(SshLaunchTest, WrapperNamesTheHostOfAMissingProgram) {
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                       RunWrapperToEnd(Command("h1", {"/nonexistent/gravacd", "--x"})));
  EXPECT_EQ(r.status.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("gravacrun: host h1: /nonexistent/gravacd: command not found"));
}

TEST(SshLaunchTest, WrapperReportsReadyFilesAndRemovesItsFolder) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/node1";
  RemoteCommand c = Command(
      "h1", {"sh", "-c", absl::StrCat("sleep 0.3; echo 4321 > ", dir, "/port; sleep 0.5")});
  c.dir = dir;
  c.remove_dir = true;
  c.ready_files = {dir + "/port"};
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, RunWrapperToEnd(c));
  EXPECT_EQ(r.status.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "@gravacrun-ready 4321\n");
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Files sent ahead of the lifeline: written 0600 into a private 0700 folder under $TMPDIR, their
// paths exported, the folder gone when the program ends.
TEST(SshLaunchTest, WrapperWritesFilesFromStdinPrivatelyAndRemovesThem) {
  TempDir tmp;
  const std::string pem = "-----BEGIN PRIVATE KEY-----\nMIGH 'quoted' $HOME \\n\n-----END PRIVATE KEY-----\n";
  RemoteCommand c = Command(
      "h1", {"sh", "-c",
             "stat -c '%a' \"$(dirname \"$KEY\")\" \"$KEY\" \"$CA\"; cat \"$KEY\" \"$CA\"; "
             "dirname \"$KEY\" >&2"});
  c.env = {{"TMPDIR", tmp.path()}};
  c.files = {{.env = "KEY", .name = "node.key", .contents = pem},
             {.env = "CA", .name = "ca.crt", .contents = "no final newline"}};
  ASSERT_OK_AND_ASSIGN(std::string payload, RemoteFilesPayload(c));
  EXPECT_THAT(payload, ::testing::StartsWith("KEY node.key 3\n-----BEGIN"));
  int writer = -1;
  ASSERT_OK_AND_ASSIGN(netemu::Process p, RunWrapper(c, &writer));
  ASSERT_EQ(write(writer, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, p.Collect(absl::Seconds(20)));
  close(writer);
  ASSERT_EQ(r.status.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("700\n600\n600\n", pem, "no final newline\n"));
  const std::string folder(absl::StripAsciiWhitespace(r.err));
  EXPECT_THAT(folder, ::testing::StartsWith(tmp.path() + "/gravacrun-tls-"));
  EXPECT_FALSE(std::filesystem::exists(folder));
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

// The private folder goes also when the lifeline closes (ssh gone) under a running program.
TEST(SshLaunchTest, WrapperRemovesItsFilesWhenItsStdinCloses) {
  TempDir tmp;
  RemoteCommand c = Command("h1", {"/bin/sh", "-c", "echo started; sleep 300 & wait"});
  c.env = {{"TMPDIR", tmp.path()}};
  c.kill_grace = absl::Seconds(1);
  c.files = {{.env = "KEY", .name = "tls.key", .contents = "secret\n"}};
  ASSERT_OK_AND_ASSIGN(std::string payload, RemoteFilesPayload(c));
  int writer = -1;
  ASSERT_OK_AND_ASSIGN(netemu::Process p, RunWrapper(c, &writer));
  ASSERT_EQ(write(writer, payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (std::filesystem::is_empty(tmp.path()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(std::filesystem::is_empty(tmp.path()));
  absl::SleepFor(absl::Milliseconds(200));
  close(writer);
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, p.Collect(absl::Seconds(20)));
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << r.err;
}

// Files that stop short (ssh lost mid-way) fail the process naming the host, and leave nothing.
TEST(SshLaunchTest, WrapperFailsOnFilesThatDoNotArriveInFull) {
  TempDir tmp;
  RemoteCommand c = Command("h1", {"/bin/true"});
  c.env = {{"TMPDIR", tmp.path()}};
  c.files = {{.env = "KEY", .name = "node.key", .contents = "a\nb\nc\n"}};
  int writer = -1;
  ASSERT_OK_AND_ASSIGN(netemu::Process p, RunWrapper(c, &writer));
  const std::string partial = "KEY node.key 3\na\n";
  ASSERT_EQ(write(writer, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  close(writer);
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, p.Collect(absl::Seconds(20)));
  EXPECT_EQ(r.status.exit_code, 126);
  EXPECT_THAT(r.err, HasSubstr("gravacrun: host h1: the job's certificates did not arrive"));
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(SshLaunchTest, FilesWithBadNamesAreRefused) {
  for (RemoteFile f : {RemoteFile{.env = "A B", .name = "x", .contents = ""},
                       RemoteFile{.env = "1A", .name = "x", .contents = ""},
                       RemoteFile{.env = "A", .name = "../x", .contents = ""},
                       RemoteFile{.env = "A", .name = "..", .contents = ""}}) {
    RemoteCommand c = Command("h1", {"/bin/true"});
    c.files = {f};
    EXPECT_THAT(RemoteFilesPayload(c).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host 'h1'")))
        << f.env << " " << f.name;
  }
}

// End of file on the wrapper's stdin (ssh gone) stops the program's whole process group, with
// SIGKILL after the grace for one that ignores SIGTERM.
TEST(SshLaunchTest, WrapperStopsTheProgramsGroupWhenItsStdinCloses) {
  for (bool ignore_term : {false, true}) {
    SCOPED_TRACE(ignore_term ? "ignores SIGTERM" : "obeys SIGTERM");
    TempDir tmp;
    const std::string pid_file = tmp.path() + "/child.pid";
    const std::string script =
        absl::StrCat(ignore_term ? "trap '' TERM; " : "", "sleep 300 & echo $! > ", pid_file,
               "; sleep 300");
    RemoteCommand c = Command("h1", {"sh", "-c", script});
    c.kill_grace = absl::Seconds(1);
    int writer = -1;
    ASSERT_OK_AND_ASSIGN(netemu::Process p, RunWrapper(c, &writer));
    const pid_t grandchild = ReadPid(pid_file, absl::Seconds(10));
    ASSERT_GT(grandchild, 0);
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE(p.Wait(absl::Milliseconds(1)).status().code() ==
                absl::StatusCode::kDeadlineExceeded);  // still running while stdin is open
    const absl::Time closed = absl::Now();
    close(writer);
    ASSERT_OK_AND_ASSIGN(netemu::CommandResult r, p.Collect(absl::Seconds(20)));
    EXPECT_NE(r.status.exit_code, 0);
    EXPECT_TRUE(GoneWithin(grandchild, absl::Seconds(5))) << "pid " << grandchild;
    EXPECT_LT(absl::Now() - closed, absl::Seconds(5));
    if (!GoneWithin(grandchild, absl::ZeroDuration())) kill(grandchild, SIGKILL);
  }
}

}  // namespace
}  // namespace gravac::runner

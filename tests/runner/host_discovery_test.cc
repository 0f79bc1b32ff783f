// Host discovery (gravacrun --host-discovery-script): Horovod's output format, every kind of bad
// output refused naming the line, and real scripts run to their end: one that fails, one that
// hangs (killed at the timeout), one that cannot be executed. Never a hang.
#include "runner/host_discovery.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/options.h"

namespace gravac::runner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P2(HostIs, host, slots, "") { return arg.host == host && arg.slots == slots; }

TEST(HostDiscoveryTest, ParsesHorovodsFormatWithDefaultSlots) {
  ASSERT_OK_AND_ASSIGN(std::vector<HostSlots> hosts,
                       ParseDiscoveredHosts("host-1:4\n\n  host_2 \nnode.example.com:1\n", 2, "d"));
  EXPECT_THAT(hosts, ElementsAre(HostIs("host-1", 4), HostIs("host_2", 2),
                                 HostIs("node.example.com", 1)));
}

TEST(HostDiscoveryTest, RefusesBadOutputNamingTheLine) {
  EXPECT_THAT(ParseDiscoveredHosts("a:2\nb c\n", 1, "d.sh"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("d.sh: line 2 'b c': 'b c' is not a host name")));
  EXPECT_THAT(ParseDiscoveredHosts("a:0\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slots '0' of host 'a' are not a positive integer")));
  EXPECT_THAT(ParseDiscoveredHosts("a:two\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots 'two'")));
  EXPECT_THAT(ParseDiscoveredHosts("a:-3\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots '-3'")));
  EXPECT_THAT(ParseDiscoveredHosts("a:2:3\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots '2:3'")));
  EXPECT_THAT(ParseDiscoveredHosts("a:1\nb\na:2\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 3 'a:2': host 'a' is listed twice")));
  EXPECT_THAT(ParseDiscoveredHosts("Traceback (most recent call last):\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a host name")));
  EXPECT_THAT(ParseDiscoveredHosts(" \n\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("printed no host")));
  EXPECT_THAT(ParseDiscoveredHosts(":4\n", 1, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a host name")));
}

class ScriptTest : public ::testing::Test {
 protected:
  std::string Script(const std::string& body, bool executable = true) {
    char path[] = "/tmp/gravac-discovery-XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    close(fd);
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path, executable ? 0755 : 0644);
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(ScriptTest, RunsAScriptToItsHosts) {
  HostDiscovery d(Script("echo a:2; echo b"), 3, absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(std::vector<HostSlots> hosts, d.RunOnce());
  EXPECT_THAT(hosts, ElementsAre(HostIs("a", 2), HostIs("b", 3)));
  ASSERT_OK_AND_ASSIGN(hosts, d.RunOnce());  // again: a fresh run
  EXPECT_EQ(hosts.size(), 2u);
}

TEST_F(ScriptTest, FailingScriptNamesItsExitAndLastError) {
  HostDiscovery d(Script("echo a:2; echo 'cloud API down' >&2; exit 3"), 1, absl::Seconds(10));
  EXPECT_THAT(d.RunOnce(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                    HasSubstr("exited with code 3: cloud API down")));
}

TEST_F(ScriptTest, HangingScriptIsKilledAtTheTimeout) {
  HostDiscovery d(Script("echo a:2; sleep 30"), 1, absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  EXPECT_THAT(d.RunOnce(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                    HasSubstr("did not finish within 300ms (killed)")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(d.running());
}

TEST_F(ScriptTest, PollNeverBlocksWhileTheScriptRuns) {
  HostDiscovery d(Script("sleep 0.3; echo late:1"), 1, absl::Seconds(10));
  ASSERT_TRUE(d.Start(absl::Now()).ok());
  const absl::Time start = absl::Now();
  EXPECT_FALSE(d.Poll(absl::Now()).has_value());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  std::optional<absl::StatusOr<std::vector<HostSlots>>> r;
  while (!(r = d.Poll(absl::Now())).has_value()) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_THAT(**r, ElementsAre(HostIs("late", 1)));
}

TEST_F(ScriptTest, NotExecutableIsRefusedByTheCommandLine) {
  const std::string script = Script("echo a", /*executable=*/false);
  EXPECT_THAT(ParseRunnerArgs({"-np", "1", "--host-discovery-script", script.c_str(), "--", "x"},
                              FixedEnvironment({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not an executable file (chmod +x it)")));
  EXPECT_THAT(ParseRunnerArgs({"-np", "1", "--host-discovery-script", "/nonexistent/d.sh", "--",
                               "x"},
                              FixedEnvironment({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(not found)")));
  // And at run time (the file lost its mode after the start): exit 126, said as such.
  HostDiscovery d(script, 1, absl::Seconds(10));
  EXPECT_THAT(d.RunOnce(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                    HasSubstr("not found or not executable")));
}

TEST_F(ScriptTest, CommandLineDefaultsMinNpAndRefusesFixedHosts) {
  const std::string script = Script("echo a:2");
  ASSERT_OK_AND_ASSIGN(RunnerOptions o,
                       ParseRunnerArgs({"-np", "2", "--host-discovery-script", script.c_str(),
                                        "--slots", "2", "--", "x"},
                                       FixedEnvironment({})));
  EXPECT_EQ(o.min_np, 2);  // Horovod's default: -np
  EXPECT_EQ(o.slots, 2);
  EXPECT_EQ(o.host_discovery_script, script);
  EXPECT_THAT(ParseRunnerArgs({"-np", "2", "--nodes", "2", "--host-discovery-script",
                               script.c_str(), "--", "x"},
                              FixedEnvironment({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--nodes")));
  EXPECT_THAT(ParseRunnerArgs({"-np", "2", "--slots", "0", "--", "x"}, FixedEnvironment({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--slots must be")));
}

}  // namespace
}  // namespace gravac::runner

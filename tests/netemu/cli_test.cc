// Drives the gravac-netemu binary (path in GRAVAC_NETEMU_CLI) through create, list, run and
// destroy. Needs root like cluster_test.cc and skips otherwise.
#include <unistd.h>

#include "absl/strings/str_split.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/process.h"

namespace gravac::netemu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<CommandResult> Cli(std::vector<std::string> args) {
  args.insert(args.begin(), GRAVAC_NETEMU_CLI);
  return RunCommand(args);
}

TEST(NetemuCliTest, BadUsageFailsWithUsage) {
  ASSERT_OK_AND_ASSIGN(CommandResult r, Cli({"frobnicate"}));
  EXPECT_EQ(r.status.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("usage: gravac-netemu create"));
}

TEST(NetemuCliTest, CreateRunDestroy) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  const std::string probe = "gvcprobe-cli-" + std::to_string(getpid());
  absl::StatusOr<std::string> added = RunChecked({"ip", "netns", "add", probe});
  if (!added.ok()) GTEST_SKIP() << "no network namespaces here: " << added.status();
  ASSERT_TRUE(RunChecked({"ip", "netns", "del", probe}).ok());
  ASSERT_OK_AND_ASSIGN(CommandResult created,
                       Cli({"create", "--nodes=2", "--rate=1e9", "--prefix=gvcclitest"}));
  ASSERT_TRUE(created.status.success()) << created.err;
  // "cluster <name> subnet <cidr>" then "node <i> netns <ns> address <ip>" per node.
  std::vector<std::string> first =
      absl::StrSplit(created.out.substr(0, created.out.find('\n')), ' ');
  ASSERT_EQ(first.size(), 4u) << created.out;
  const std::string name = first[1];
  std::optional<ClusterName> parsed = ParseClusterName(name);
  ASSERT_TRUE(parsed.has_value()) << name;
  // The CLI process is gone, but its cluster must stay until `destroy`.
  ASSERT_OK_AND_ASSIGN(CommandResult listed, Cli({"list", "--prefix=gvcclitest"}));
  EXPECT_THAT(listed.out, HasSubstr(name + " nodes 2"));

  ASSERT_OK_AND_ASSIGN(CommandResult ran, Cli({"run", name, "1", "--", "ip", "-4", "-o", "addr",
                                               "show", "dev", "eth0"}));
  EXPECT_TRUE(ran.status.success()) << ran.err;
  EXPECT_THAT(ran.out, HasSubstr(parsed->NodeAddress(1) + "/24"));
  ASSERT_OK_AND_ASSIGN(CommandResult failed, Cli({"run", name, "0", "--", "sh", "-c", "exit 7"}));
  EXPECT_EQ(failed.status.exit_code, 7);

  ASSERT_OK_AND_ASSIGN(CommandResult destroyed, Cli({"destroy", name}));
  EXPECT_TRUE(destroyed.status.success()) << destroyed.err;
  ASSERT_OK_AND_ASSIGN(listed, Cli({"list", "--prefix=gvcclitest"}));
  EXPECT_THAT(listed.out, Not(HasSubstr(name)));
}

}  // namespace
}  // namespace gravac::netemu

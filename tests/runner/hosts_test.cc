// Host lists (Horovod's -H, Horovod's and Open MPI's hostfiles), how ranks fill them, and what
// gravacrun's command line makes of them.
#include "runner/hosts.h"

#include <unistd.h>

#include <cstdio>
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

absl::StatusOr<RunnerOptions> Parse(std::vector<const char*> args) {
  return ParseRunnerArgs(args, FixedEnvironment({}));
}

TEST(HostsTest, HorovodsListWithDefaultSlotsAndIpv6) {
  ASSERT_OK_AND_ASSIGN(std::vector<HostSlots> hosts, ParseHostList("a:4, b ,10.0.0.3:2,fe80::1"));
  EXPECT_THAT(hosts, ElementsAre(HostIs("a", 4), HostIs("b", 1), HostIs("10.0.0.3", 2),
                                 HostIs("fe80::1", 1)));
  EXPECT_THAT(ParseHostList("a:0"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("host 'a' has slots '0'")));
  EXPECT_THAT(ParseHostList("a:x"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("slots 'x'")));
  EXPECT_THAT(ParseHostList(" , "), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("no hosts")));
  EXPECT_THAT(ParseHostList(":4"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("names no host")));
}

TEST(HostsTest, HostfilesInHorovodsAndOpenMpisFormats) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<HostSlots> hosts,
      ParseHostfileText("# cluster\nnode1 slots=4 max_slots=8\n\nnode2:2   # Horovod's\r\n"
                        "node3\n\tnode4 slots=3\n",
                        "hf"));
  EXPECT_THAT(hosts, ElementsAre(HostIs("node1", 4), HostIs("node2", 2), HostIs("node3", 1),
                                 HostIs("node4", 3)));
  EXPECT_THAT(ParseHostfileText("node1 slots=two\n", "hf"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--hostfile hf: host 'node1' has slots 'two'")));
  EXPECT_THAT(ParseHostfileText("node1 cpus=2\n", "hf"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'cpus=2' after host 'node1'")));
  EXPECT_THAT(ParseHostfileText("# nothing\n", "hf"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no hosts")));
  EXPECT_THAT(ReadHostfile("/nonexistent/gravac-hostfile"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot read")));
}

TEST(HostsTest, RanksFillTheHostsInOrder) {
  std::vector<HostSlots> hosts = {{"a", 4}, {"b", 4}, {"c", 4}};
  ASSERT_OK_AND_ASSIGN(std::vector<int> ranks, FillHosts(&hosts, 6));
  EXPECT_THAT(ranks, ElementsAre(4, 2));
  EXPECT_EQ(hosts.size(), 2u);  // c gets no rank: nothing runs there
  hosts = {{"a", 3}, {"b", 1}};
  ASSERT_OK_AND_ASSIGN(ranks, FillHosts(&hosts, 0));  // -np not given: every slot
  EXPECT_THAT(ranks, ElementsAre(3, 1));
  EXPECT_THAT(FillHosts(&hosts, 5), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("-np 5 is more than the 4 slots")));
}

TEST(HostsTest, ThisMachine) {
  EXPECT_TRUE(IsThisMachine("localhost", "trainer-7"));
  EXPECT_TRUE(IsThisMachine("127.0.0.1", ""));
  EXPECT_TRUE(IsThisMachine("::1", ""));
  EXPECT_TRUE(IsThisMachine("trainer-7", "trainer-7"));
  EXPECT_FALSE(IsThisMachine("trainer-8", "trainer-7"));
  EXPECT_FALSE(IsThisMachine("", ""));
  EXPECT_FALSE(LocalHostname().empty());
}

TEST(HostsTest, GravacrunsCommandLine) {
  ASSERT_OK_AND_ASSIGN(
      RunnerOptions o,
      Parse({"--hosts", "a:3,b:3", "-np", "4", "--ssh_port", "2222", "--ssh_identity_file", "/id",
             "--ssh_options", "-o StrictHostKeyChecking=no -l 'a user'",
             "--ssh_connect_timeout_s", "2.5", "--", "w"}));
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.nodes, 2);
  EXPECT_THAT(o.hosts, ElementsAre("a", "b"));
  ASSERT_EQ(o.layout.size(), 2u);
  EXPECT_EQ(o.layout[0].first_rank, 0);
  EXPECT_EQ(o.layout[0].local_size, 3);  // filled in order, as horovodrun does
  EXPECT_EQ(o.layout[1].first_rank, 3);
  EXPECT_EQ(o.layout[1].local_size, 1);
  EXPECT_EQ(o.ssh.port, 2222);
  EXPECT_EQ(o.ssh.identity_file, "/id");
  EXPECT_THAT(o.ssh.options, ElementsAre("-o", "StrictHostKeyChecking=no", "-l", "a user"));
  EXPECT_EQ(o.ssh.connect_timeout, absl::Milliseconds(2500));

  ASSERT_OK_AND_ASSIGN(o, Parse({"--hosts", "a:2,b:2", "--", "w"}));  // -np: every slot
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.nodes, 2);
  EXPECT_TRUE(o.controller.empty());

  char path[] = "/tmp/gravac_hostfile_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "a slots=2\nb:1\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ASSERT_OK_AND_ASSIGN(o, Parse({"--hostfile", path, "--controller", "ctl:5000", "--", "w"}));
  std::remove(path);
  EXPECT_EQ(o.np, 3);
  EXPECT_THAT(o.hosts, ElementsAre("a", "b"));
  EXPECT_EQ(o.controller, "ctl:5000");
}

TEST(HostsTest, BadHostCommandLinesNameWhatIsWrong) {
  EXPECT_THAT(Parse({"--hosts", "a:2", "--hostfile", "/x", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give one")));
  EXPECT_THAT(Parse({"--hosts", "a:2,b:2", "--nodes", "2", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give one of them")));
  EXPECT_THAT(Parse({"--hosts", "a:2", "-np", "3", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than the 2 slots")));
  EXPECT_THAT(Parse({"--hosts", "a:2", "--link", "1gbit", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--link do not apply")));
  EXPECT_THAT(Parse({"--hosts", "-oProxyCommand=x:2", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a host name")));
  EXPECT_THAT(Parse({"--hosts", "a:2", "--ssh_port", "70000", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--ssh_port")));
  EXPECT_THAT(Parse({"--hosts", "a:2", "--controller", "c:1", "--theta_min", "4", "--", "w"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("running controller")));
}

}  // namespace
}  // namespace gravac::runner

// gravacrun's command line: rates, links, -np/--nodes validation, forwarding, rank layout.
#include "runner/options.h"

#include <string>
#include <vector>

#include "core/absl_compat.h"
#include "core/job_settings.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::runner {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<RunnerOptions> Parse(std::vector<const char*> args,
                                    std::map<std::string, std::string, std::less<>> env = {}) {
  return ParseRunnerArgs(args, FixedEnvironment(std::move(env)));
}

TEST(ParseRateTest, UnitsAndPlainNumbers) {
  EXPECT_THAT(*ParseRate("1gbit"), DoubleEq(1e9));
  EXPECT_THAT(*ParseRate("10gbit"), DoubleEq(1e10));
  EXPECT_THAT(*ParseRate("25Gbit"), DoubleEq(2.5e10));
  EXPECT_THAT(*ParseRate("500mbit"), DoubleEq(5e8));
  EXPECT_THAT(*ParseRate("64kbit"), DoubleEq(64e3));
  EXPECT_THAT(*ParseRate("1e9"), DoubleEq(1e9));
  EXPECT_THAT(*ParseRate("2500000"), DoubleEq(2.5e6));
  EXPECT_THAT(*ParseRate("1.5gbit"), DoubleEq(1.5e9));
  EXPECT_THAT(*ParseRate("1200bit"), DoubleEq(1200));
}

TEST(ParseRateTest, RejectsNonRates) {
  for (const char* bad : {"", "gbit", "fast", "-1gbit", "0", "1gbps", "1 gbit", "nan", "inf"}) {
    EXPECT_THAT(ParseRate(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(ParseLinkTest, RateAndDelay) {
  ASSERT_OK_AND_ASSIGN(netemu::LinkSpec link, ParseLink("10gbit,1ms"));
  EXPECT_THAT(link.rate_bits_per_s, DoubleEq(1e10));
  EXPECT_EQ(link.delay, absl::Milliseconds(1));
  ASSERT_OK_AND_ASSIGN(link, ParseLink("1e9"));
  EXPECT_EQ(link.delay, absl::ZeroDuration());
  ASSERT_OK_AND_ASSIGN(link, ParseLink("500mbit,250us"));
  EXPECT_EQ(link.delay, absl::Microseconds(250));
}

TEST(ParseLinkTest, RejectsBadDelayAndOutOfRange) {
  EXPECT_THAT(ParseLink("1gbit,soon"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delay 'soon'")));
  EXPECT_THAT(ParseLink("1gbit,-1ms"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLink("1000tbit"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLink(",1ms"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseRunnerArgsTest, MinimalCommandLine) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "4", "--", "./train", "--lr", "0.1"}));
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.nodes, 1);
  EXPECT_FALSE(o.link.has_value());
  EXPECT_THAT(o.command, ElementsAre("./train", "--lr", "0.1"));
  EXPECT_THAT(o.controller_args, IsEmpty());
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_net_devices=lo"));
}

// Every launch is a new run of its job: a fresh run id unless one is given.
TEST(ParseRunnerArgsTest, JobNameAndAFreshRunIdPerLaunch) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions a, Parse({"-np", "2", "--", "true"}));
  ASSERT_OK_AND_ASSIGN(RunnerOptions b, Parse({"-np", "2", "--", "true"}));
  EXPECT_EQ(a.job.name, "gravacrun");
  EXPECT_FALSE(a.job.run_id.empty());
  EXPECT_NE(a.job.run_id, b.job.run_id);
  ASSERT_OK_AND_ASSIGN(RunnerOptions c,
                       Parse({"-np", "2", "--job_name", "resnet", "--run_id", "r7", "--", "true"}));
  EXPECT_EQ(c.job, (JobId{"resnet", "r7"}));
  EXPECT_THAT(Parse({"-np", "2", "--job_name", "a/b", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--job_name")));
}

TEST(ParseRunnerArgsTest, MetricsOnByDefaultOffOnRequestAndSdFile) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "2", "--", "true"}));
  EXPECT_TRUE(o.metrics);
  EXPECT_EQ(o.metrics_sd_file, "");
  ASSERT_OK_AND_ASSIGN(
      o, Parse({"-np", "2", "--metrics", "off", "--metrics-sd-file", "/tmp/t.json", "--", "true"}));
  EXPECT_FALSE(o.metrics);
  EXPECT_EQ(o.metrics_sd_file, "/tmp/t.json");
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--metrics=on", "--", "true"}));
  EXPECT_TRUE(o.metrics);
  EXPECT_THAT(Parse({"-np", "2", "--metrics", "maybe", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--metrics must be on or off, got 'maybe'")));
}

TEST(ParseRunnerArgsTest, FlagFormsAndDashes) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o,
                       Parse({"-np=6", "--nodes=3", "--kill-grace-s", "0.5", "--", "true"}));
  EXPECT_EQ(o.np, 6);
  EXPECT_EQ(o.nodes, 3);
  EXPECT_EQ(o.kill_grace, absl::Milliseconds(500));
  ASSERT_OK_AND_ASSIGN(o, Parse({"--np", "2", "--", "true"}));
  EXPECT_EQ(o.np, 2);
}

TEST(ParseRunnerArgsTest, ControllerRestartsDefaultAndBounds) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "2", "--", "true"}));
  EXPECT_EQ(o.controller_restarts, 5);
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--controller-restarts", "0", "--", "true"}));
  EXPECT_EQ(o.controller_restarts, 0);
  EXPECT_THAT(Parse({"-np", "2", "--controller_restarts", "-1", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--controller_restarts must be 0..1000, got -1")));
}

TEST(ParseRunnerArgsTest, ElasticBounds) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "4", "--", "true"}));
  EXPECT_EQ(o.min_np, 0);  // not elastic
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "4", "--min-np", "2", "--max-np", "8",
                                 "--regroup_timeout_s", "3", "--", "true"}));
  EXPECT_EQ(o.min_np, 2);
  EXPECT_EQ(o.max_np, 8);
  EXPECT_EQ(o.regroup_timeout, absl::Seconds(3));
  EXPECT_THAT(Parse({"-np", "4", "--min-np", "5", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--min-np must be 1..-np (4), got 5")));
  EXPECT_THAT(Parse({"-np", "4", "--min-np", "2", "--max-np", "3", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max-np must be >= -np")));
  EXPECT_THAT(Parse({"-np", "4", "--max-np", "8", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs --min-np")));
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "4", "--min-np", "2", "--reset-limit", "3", "--", "true"}));
  EXPECT_EQ(o.reset_limit, 3);
  EXPECT_THAT(Parse({"-np", "4", "--reset-limit", "3", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs --min-np")));
  EXPECT_THAT(Parse({"-np", "4", "--min-np", "2", "--reset-limit", "-1", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--reset-limit must be")));
  EXPECT_EQ(o.elastic_timeout, absl::ZeroDuration());  // the controller's default
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "4", "--host-discovery-script", "/bin/true",
                                 "--elastic_timeout_s", "30", "--", "true"}));
  EXPECT_EQ(o.elastic_timeout, absl::Seconds(30));
  EXPECT_THAT(Parse({"-np", "4", "--min-np", "2", "--elastic_timeout_s", "30", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--elastic-timeout needs --host-discovery-script")));
  EXPECT_THAT(Parse({"-np", "4", "--min-np", "2", "--elastic_timeout_s", "-1", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--elastic_timeout_s must be >= 0")));
}

TEST(ParseRunnerArgsTest, ValidatesNpAndNodes) {
  EXPECT_THAT(Parse({"--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-np must be")));
  EXPECT_THAT(Parse({"-np", "0", "--", "true"}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse({"-np", "x", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'np'")));
  EXPECT_THAT(Parse({"-np", "2", "--nodes", "3", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--nodes must be 1..2")));
  EXPECT_THAT(Parse({"-np", "2", "--nodes", "0", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--nodes")));
  EXPECT_THAT(Parse({"-np", "300", "--nodes", "255", "--link", "1gbit", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--nodes must be 1..254")));
  EXPECT_THAT(Parse({"-np", "300", "--nodes", "255", "--", "true"}), IsOk());
}

TEST(ParseRunnerArgsTest, CommandErrors) {
  EXPECT_THAT(Parse({"-np", "2"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no worker command")));
  EXPECT_THAT(Parse({"-np", "2", "--"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no worker command")));
  EXPECT_THAT(Parse({"-np", "2", "hostname"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unexpected 'hostname'")));
  EXPECT_THAT(Parse({"-np", "2", "--frobnicate", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--frobnicate")));
  EXPECT_THAT(Parse({"-np", "2", "--link", "quick", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--link")));
  EXPECT_THAT(Parse({"-np", "2", "--controller_args", "'open", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unterminated quote")));
}

TEST(ParseRunnerArgsTest, HelpNeedsNothingElse) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"--help"}));
  EXPECT_TRUE(o.help_requested);
  EXPECT_THAT(RunnerHelp(), HasSubstr("--link"));
}

TEST(ParseRunnerArgsTest, ForwardsControllerAndDaemonSettings) {
  ASSERT_OK_AND_ASSIGN(
      RunnerOptions o,
      Parse({"-np", "2", "--compressor", "dgc", "--theta-min=20", "--sparse-values", "fp16",
             "--controller-args", "--window 5 --norm_mode 'layer sum'", "--fusion_threshold_bytes",
             "1024", "--daemon_args", "--stall_warning_s=2", "--", "true"}));
  EXPECT_THAT(o.controller_args,
              ElementsAre("--window", "5", "--norm_mode", "layer sum", "--compressor=dgc",
                          "--sparse_values=fp16", "--theta_min=20"));
  EXPECT_THAT(o.daemon_args, ElementsAre("--stall_warning_s=2", "--fusion_threshold_bytes=1024",
                                         "--ucx_net_devices=lo"));
}

// Every job setting of core/job_settings.h is a gravacrun flag forwarded to the controller (the
// table is the one list; a new job setting needs no change here).
TEST(ParseRunnerArgsTest, ForwardsEveryJobSetting) {
  for (const SettingSpec& job : JobSettings()) {
    const std::string flag = StrCat("--", job.name, "=v");
    ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "2", flag.c_str(), "--", "true"}));
    EXPECT_THAT(o.controller_args, ElementsAre(flag)) << job.name;
    EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_net_devices=lo")) << job.name;
  }
  // Not given: nothing is forwarded, the controller applies its defaults and GRAVAC_* itself.
  ASSERT_OK_AND_ASSIGN(RunnerOptions o,
                       Parse({"-np", "2", "--", "true"}, {{"GRAVAC_THETA_MIN", "4"}}));
  EXPECT_THAT(o.controller_args, IsEmpty());
  EXPECT_THAT(RunnerHelp(), HasSubstr("controller: least compression factor (default 10)"));
}

TEST(ParseRunnerArgsTest, LinkMakesTheDataPlaneUseTcpOnEth0) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o,
                       Parse({"-np", "4", "--nodes", "2", "--link", "1gbit,1ms", "--", "true"}));
  ASSERT_TRUE(o.link.has_value());
  EXPECT_THAT(o.link->rate_bits_per_s, DoubleEq(1e9));
  EXPECT_EQ(o.link->delay, absl::Milliseconds(1));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_tls=tcp", "--ucx_net_devices=eth0"));
  ASSERT_OK_AND_ASSIGN(
      o, Parse({"-np", "2", "--link", "1gbit", "--ucx_tls", "tcp,self", "--", "true"}));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_tls=tcp,self", "--ucx_net_devices=eth0"));
}

// A job with every node on this machine keeps its data plane on loopback (shared memory stays
// allowed): interfaces that come and go on the host cannot break it. A device list given any
// way wins, and jobs on real hosts or emulated links are not pinned.
TEST(ParseRunnerArgsTest, LocalJobPinsTheDataPlaneToLoopbackUnlessDevicesAreGiven) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "4", "--nodes", "2", "--", "true"}));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_net_devices=lo"));
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--ucx_net_devices", "eth1", "--", "true"}));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_net_devices=eth1"));
  ASSERT_OK_AND_ASSIGN(
      o, Parse({"-np", "2", "--daemon_args", "--ucx_net_devices=eth2", "--", "true"}));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_net_devices=eth2"));
  for (const char* var : {"UCX_NET_DEVICES", "GRAVAC_UCX_NET_DEVICES"}) {
    ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--", "true"}, {{var, "eth3"}}));
    EXPECT_THAT(o.daemon_args, IsEmpty()) << var;
  }
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--hosts", "a:1,b:1", "--", "true"}));
  EXPECT_THAT(o.daemon_args, IsEmpty());
  ASSERT_OK_AND_ASSIGN(o, Parse({"-np", "2", "--link", "1gbit", "--", "true"}));
  EXPECT_THAT(o.daemon_args, ElementsAre("--ucx_tls=tcp", "--ucx_net_devices=eth0"));
}

TEST(ParseRunnerArgsTest, NodeModeTakesTheSocketAndControllerFromFlagsOrEnvironment) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions whole, Parse({"-np", "4", "--nodes", "2", "--", "true"},
                                                  {{"GRAVAC_DAEMON_SOCKET", "/s.sock"}}));
  EXPECT_EQ(whole.node, -1);  // the environment alone does not switch the mode
  ASSERT_OK_AND_ASSIGN(RunnerOptions o,
                       Parse({"-np", "4", "--nodes", "2", "--node", "1", "--daemon_socket",
                              "/run/g.sock", "--controller", "ctl:7460", "--", "true"}));
  EXPECT_EQ(o.node, 1);
  EXPECT_EQ(o.daemon_socket, "/run/g.sock");
  EXPECT_EQ(o.controller, "ctl:7460");
  ASSERT_OK_AND_ASSIGN(
      o, Parse({"-np", "4", "--nodes", "2", "--", "true"}, {{"GRAVACRUN_NODE", "0"},
                                                            {"GRAVAC_DAEMON_SOCKET", "/e.sock"},
                                                            {"GRAVAC_CONTROLLER", "c:1"}}));
  EXPECT_EQ(o.node, 0);
  EXPECT_EQ(o.daemon_socket, "/e.sock");
  EXPECT_EQ(o.controller, "c:1");
}

TEST(ParseRunnerArgsTest, NodeModeRefusesWhatItWouldNotUse) {
  EXPECT_THAT(
      Parse({"-np", "4", "--nodes", "2", "--node", "2", "--daemon_socket", "/s", "--", "true"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node must be -1 or 0..1")));
  EXPECT_THAT(
      Parse({"-np", "4", "--nodes", "2", "--node", "0", "--", "true"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node needs --daemon_socket")));
  EXPECT_THAT(
      Parse({"-np", "4", "--nodes", "2", "--node", "0", "--daemon_socket", "/s", "--window", "5",
             "--", "true"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node starts no controller")));
  EXPECT_THAT(
      Parse({"-np", "4", "--nodes", "2", "--node", "0", "--daemon_socket", "/s", "--link", "1gbit",
             "--", "true"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node starts no controller")));
  EXPECT_THAT(Parse({"-np", "4", "--node", "-2", "--", "true"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node must be -1 or >= 0")));
}

TEST(ParseRunnerArgsTest, BinaryPathsFromEnvironment) {
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, Parse({"-np", "1", "--", "true"},
                                              {{"GRAVACRUN_GRAVACD", "/opt/g/gravacd"}}));
  EXPECT_EQ(o.gravacd_path, "/opt/g/gravacd");
  EXPECT_EQ(o.controller_path, "");
}

TEST(SplitArgsTest, QuotesAndSpaces) {
  EXPECT_THAT(*SplitArgs(""), IsEmpty());
  EXPECT_THAT(*SplitArgs("  a  b\tc "), ElementsAre("a", "b", "c"));
  EXPECT_THAT(*SplitArgs("--x 'y z' \"\" w"), ElementsAre("--x", "y z", "", "w"));
  EXPECT_THAT(SplitArgs("\"open"), StatusIs(absl::StatusCode::kInvalidArgument));
}

std::vector<std::pair<int, int>> Pairs(const std::vector<NodeRanks>& layout) {
  std::vector<std::pair<int, int>> out;
  for (const NodeRanks& n : layout) out.emplace_back(n.first_rank, n.local_size);
  return out;
}

TEST(RankLayoutTest, NodeMajorWithUnevenNodesFirst) {
  using P = std::pair<int, int>;
  EXPECT_THAT(Pairs(RankLayout(4, 2)), ElementsAre(P{0, 2}, P{2, 2}));
  EXPECT_THAT(Pairs(RankLayout(5, 2)), ElementsAre(P{0, 3}, P{3, 2}));
  EXPECT_THAT(Pairs(RankLayout(7, 3)), ElementsAre(P{0, 3}, P{3, 2}, P{5, 2}));
  EXPECT_THAT(Pairs(RankLayout(3, 3)), ElementsAre(P{0, 1}, P{1, 1}, P{2, 1}));
  EXPECT_THAT(Pairs(RankLayout(1, 1)), ElementsAre(P{0, 1}));
  EXPECT_THAT(RankLayout(0, 2), IsEmpty());
}

TEST(RankLayoutTest, CoversEveryRankOnce) {
  for (int np = 1; np <= 40; ++np) {
    for (int nodes = 1; nodes <= np; ++nodes) {
      std::vector<NodeRanks> layout = RankLayout(np, nodes);
      ASSERT_EQ(layout.size(), static_cast<size_t>(nodes));
      int next = 0;
      for (const NodeRanks& n : layout) {
        EXPECT_EQ(n.first_rank, next);
        EXPECT_GE(n.local_size, np / nodes);
        EXPECT_LE(n.local_size, np / nodes + 1);
        next += n.local_size;
      }
      EXPECT_EQ(next, np);
    }
  }
}

}  // namespace
}  // namespace gravac::runner

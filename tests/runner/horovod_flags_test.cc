// horovodrun's flags on gravacrun: mapped, noted, refused; -H, --hostfile and the ssh flags.
#include "runner/horovod_flags.h"

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
using ::testing::IsEmpty;
using ::testing::Pair;

absl::StatusOr<HorovodTranslation> Translate(std::vector<const char*> args) {
  return TranslateHorovodArgs(args);
}

TEST(HorovodFlagsTest, MapsHorovodrunFlagsAndFindsTheCommand) {
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t, Translate({"-np",
                                                        "4",
                                                        "--fusion-threshold-mb",
                                                        "32",
                                                        "--cycle-time-ms",
                                                        "5",
                                                        "--start-timeout",
                                                        "90",
                                                        "--network-interface",
                                                        "eth0",
                                                        "--log-level",
                                                        "TRACE",
                                                        "--stall-check-warning-time-seconds",
                                                        "120",
                                                        "--verbose",
                                                        "-x",
                                                        "A=1 2",
                                                        "-x",
                                                        "B",
                                                        "--timeline-filename",
                                                        "/tmp/t.json",
                                                        "python",
                                                        "train.py",
                                                        "--lr",
                                                        "0.1"}));
  EXPECT_THAT(t.args,
              ElementsAre("-np", "4", "--fusion_threshold_bytes=33554432", "--cycle-time-ms", "5",
                          "--start_timeout_s=90", "--ucx_net_devices=eth0", "--log_level=debug",
                          "--stall_warning_s=120", "--verbose", "--timeline_filename=/tmp/t.json",
                          "--", "python", "train.py", "--lr", "0.1"));
  EXPECT_THAT(t.env, ElementsAre(Pair("A", "1 2")));
  EXPECT_THAT(t.forward, ElementsAre("A", "B"));  // both go to the hosts reached over ssh
  EXPECT_THAT(t.notes, IsEmpty());
  // The result is a command line gravacrun parses.
  std::vector<const char*> argv;
  for (const std::string& a : t.args) argv.push_back(a.c_str());
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, ParseRunnerArgs(argv, FixedEnvironment({})));
  EXPECT_EQ(o.np, 4);
  EXPECT_THAT(o.command, ElementsAre("python", "train.py", "--lr", "0.1"));
  EXPECT_THAT(o.daemon_args, ::testing::Contains("--fusion_threshold_bytes=33554432"));
  EXPECT_THAT(o.daemon_args, ::testing::Contains("--cycle_time_ms=5"));
  EXPECT_EQ(o.start_timeout, absl::Seconds(90));
}

TEST(HorovodFlagsTest, EqualsFormsAndGravacrunFlagsPassThrough) {
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t,
                       Translate({"--num-proc=2", "--nodes", "2", "--theta-min", "4",
                                  "--fusion-threshold-mb=0.5", "--", "./w"}));
  EXPECT_THAT(t.args, ElementsAre("--np=2", "--nodes", "2", "--theta-min", "4",
                                  "--fusion_threshold_bytes=524288", "--", "./w"));
}

TEST(HorovodFlagsTest, NotesFlagsGravacNeedsNothingFor) {
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t,
                       Translate({"-np", "2", "--gloo", "--hierarchical-allreduce",
                                  "--cache-capacity", "1024", "python", "t.py"}));
  EXPECT_THAT(t.args, ElementsAre("-np", "2", "--", "python", "t.py"));
  ASSERT_EQ(t.notes.size(), 3u);
  EXPECT_THAT(t.notes[0], HasSubstr("--gloo: accepted"));
  EXPECT_THAT(t.notes[1], HasSubstr("within a node"));
}

TEST(HorovodFlagsTest, ElasticBoundsBecomeGravacrunsOwn) {
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t,
                       Translate({"-np", "4", "--min-np", "2", "--max-np", "6", "python"}));
  EXPECT_THAT(t.args, ElementsAre("-np", "4", "--min_np=2", "--max_np=6", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"--host-discovery-script", "d.sh", "--slots-per-host", "2",
                                     "python"}));
  EXPECT_THAT(t.args, ElementsAre("--host_discovery_script=d.sh", "--slots=2", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"--reset-limit", "3", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--reset_limit=3", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"--elastic-timeout", "120", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--elastic_timeout_s=120", "--", "python"));
  EXPECT_THAT(Translate({"--blacklist-cooldown-range", "10", "100", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(HorovodFlagsTest, RefusesNamingTheFlagAndWhatToDo) {
  EXPECT_THAT(Translate({"-np", "2", "--timeline-mark-cycles", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--timeline-mark-cycles is not supported")));
  EXPECT_THAT(Translate({"-np", "2", "--timeline-mark-cycles", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--timeline-filename alone")));
  EXPECT_THAT(Translate({"--autotune", "-np", "2", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no autotuner")));
  EXPECT_THAT(Translate({"--blacklist-cooldown-range", "10", "100", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elastic")));
  EXPECT_THAT(Translate({"--frobnicate", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown flag '--frobnicate'")));
  EXPECT_THAT(Translate({"--fusion-threshold-mb", "lots", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'lots'")));
  EXPECT_THAT(Translate({"--log-level", "LOUD", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'LOUD'")));
  EXPECT_THAT(Translate({"-np", "2", "-x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-x needs a value")));
  EXPECT_THAT(Translate({"-x", "=v", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NAME=VALUE")));
}

TEST(HorovodFlagsTest, HostsAndSshFlagsBecomeGravacrunsOwn) {
  ASSERT_OK_AND_ASSIGN(
      HorovodTranslation t,
      Translate({"-np", "4", "-H", "node-a:2,node-b:2", "-p", "2222", "-i", "/k/id", "python"}));
  EXPECT_THAT(t.args, ElementsAre("-np", "4", "--hosts=node-a:2,node-b:2", "--ssh_port=2222",
                                  "--ssh_identity_file=/k/id", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"--hosts", "a:1", "--ssh-port", "22",
                                     "--ssh-identity-file", "/k", "--hostfile", "/h", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--hosts", "a:1", "--ssh-port", "22", "--ssh-identity-file",
                                  "/k", "--hostfile", "/h", "--", "python"));
  // What gravacrun makes of them (hosts_test.cc has the layouts and the bad lists).
  ASSERT_OK_AND_ASSIGN(t, Translate({"-H", "node-a:2,node-b:2", "-p", "2222", "python"}));
  std::vector<const char*> argv;
  for (const std::string& a : t.args) argv.push_back(a.c_str());
  ASSERT_OK_AND_ASSIGN(RunnerOptions o, ParseRunnerArgs(argv, FixedEnvironment({})));
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.nodes, 2);
  EXPECT_THAT(o.hosts, ElementsAre("node-a", "node-b"));
  EXPECT_EQ(o.ssh.port, 2222);
}

}  // namespace
}  // namespace gravac::runner

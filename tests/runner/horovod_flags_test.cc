// horovodrun's flags on gravacrun: mapped, noted, refused; -H/--hostfile on this machine.
#include "runner/horovod_flags.h"

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

using ::gravac::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

absl::StatusOr<HorovodTranslation> Translate(std::vector<const char*> args) {
  return TranslateHorovodArgs(args, "trainer-7");
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

TEST(HorovodFlagsTest, RefusesNamingTheFlagAndWhatToDo) {
  EXPECT_THAT(Translate({"-np", "2", "--timeline-mark-cycles", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--timeline-mark-cycles is not supported")));
  EXPECT_THAT(Translate({"-np", "2", "--timeline-mark-cycles", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--timeline-filename alone")));
  EXPECT_THAT(Translate({"--autotune", "-np", "2", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no autotuner")));
  EXPECT_THAT(Translate({"--min-np", "2", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elastic")));
  EXPECT_THAT(Translate({"-p", "2222", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--node I")));
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

TEST(HorovodFlagsTest, HostsOnThisMachineBecomeNodes) {
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t,
                       Translate({"-np", "4", "-H", "localhost:2,trainer-7:2", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--nodes=2", "-np", "4", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"-H", "localhost:3", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--np=3", "--nodes=1", "--", "python"));
  ASSERT_OK_AND_ASSIGN(t, Translate({"-np", "2", "-H", "localhost:2,127.0.0.1:2", "python"}));
  EXPECT_THAT(t.args, ElementsAre("--nodes=1", "-np", "2", "--", "python"));
}

TEST(HorovodFlagsTest, HostsElsewhereAndBadSlotsAreRefusedNamingTheHost) {
  EXPECT_THAT(Translate({"-np", "4", "-H", "localhost:2,gpu-node-3:2", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("host 'gpu-node-3' is not this machine")));
  EXPECT_THAT(Translate({"-np", "8", "-H", "localhost:4", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than the 4 slots")));
  EXPECT_THAT(Translate({"-np", "4", "-H", "localhost:3,localhost:1", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("equal slots")));
  EXPECT_THAT(Translate({"-H", "localhost:x", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots 'x'")));
  EXPECT_THAT(Translate({"-H", "localhost:2", "--nodes", "2", "-np", "2", "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("give one of them")));
}

TEST(HorovodFlagsTest, HostfileInHorovodsAndOpenMpisFormats) {
  char path[] = "/tmp/gravac_hostfile_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "# two local nodes\nlocalhost slots=2\n127.0.0.1:2  # Horovod's\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ASSERT_OK_AND_ASSIGN(HorovodTranslation t, Translate({"--hostfile", path, "python"}));
  EXPECT_THAT(t.args, ElementsAre("--np=4", "--nodes=2", "--", "python"));
  std::remove(path);
  EXPECT_THAT(Translate({"--hostfile", path, "python"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot read")));
}

}  // namespace
}  // namespace gravac::runner

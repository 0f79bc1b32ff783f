// gravacrun's metrics targets: the printed line per process and the Prometheus file_sd JSON.
#include "runner/metrics_targets.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;

const MetricsTarget kController{
    .job = kControllerJob, .node = -1, .host = "127.0.0.1", .port = 9470, .netns = ""};
const MetricsTarget kDaemon1{
    .job = kDaemonJob, .node = 1, .host = "198.18.7.2", .port = 41234, .netns = ""};

TEST(MetricsTargetsTest, DescribeNamesTheProcessAndItsUrl) {
  EXPECT_EQ(Describe(kController), "controller http://127.0.0.1:9470/metrics");
  EXPECT_EQ(Describe(kDaemon1), "node 1 (node1) http://198.18.7.2:41234/metrics");
  MetricsTarget inside = kDaemon1;
  inside.netns = "gravacrun-1-s7-n1";
  EXPECT_EQ(Describe(inside),
            "node 1 (node1) http://198.18.7.2:41234/metrics (inside the emulated cluster: ip "
            "netns exec gravacrun-1-s7-n1 curl -s http://198.18.7.2:41234/metrics)");
  EXPECT_EQ(NodeName(12), "node12");
}

TEST(MetricsTargetsTest, FileSdJsonHasOneGroupPerTargetWithJobAndNodeLabels) {
  EXPECT_EQ(FileSdJson({}), "[]\n");
  EXPECT_EQ(FileSdJson({kController}),
            "[\n  {\"targets\": [\"127.0.0.1:9470\"], \"labels\": {\"job\": "
            "\"gravac-controller\"}}\n]\n");
  EXPECT_EQ(FileSdJson({kController, kDaemon1}),
            "[\n"
            "  {\"targets\": [\"127.0.0.1:9470\"], \"labels\": {\"job\": \"gravac-controller\"}},\n"
            "  {\"targets\": [\"198.18.7.2:41234\"], \"labels\": {\"job\": \"gravacd\", \"node\": "
            "\"node1\"}}\n"
            "]\n");
}

TEST(MetricsTargetsTest, WriteFileAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  char tmpl[] = "/tmp/gravac-sd-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/targets.json";
  ASSERT_THAT(WriteFileAtomically(path, "[]\n"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, FileSdJson({kController})), IsOk());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), FileSdJson({kController}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_THAT(WriteFileAtomically(dir + "/missing/targets.json", "[]\n"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("missing/targets.json.tmp")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gravac::runner

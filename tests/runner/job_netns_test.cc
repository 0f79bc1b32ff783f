// A real job over emulated links (gravacrun --link): each gravacd and its workers in their own
// namespace, the data plane on UCX/tcp over the shaped eth0. A dense allreduce of 4 MB between two
// nodes sends 4 MB each way (ring, p = 2), so at 50 Mbit/s it cannot take less than ~0.64 s;
// without --link it is much faster. Needs root; skips otherwise.
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/process.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;

constexpr int kBytes = 4000000;
constexpr double kRate = 50e6;

// The seconds rank 0 printed for its dense allreduce, or -1.
double AllreduceSeconds(const std::string& out) {
  const std::string key = absl::StrCat("[rank 0] dense allreduce of ", kBytes, " bytes: ");
  const size_t at = out.find(key);
  if (at == std::string::npos) return -1;
  const size_t end = out.find(' ', at + key.size());
  double seconds = -1;
  if (!absl::SimpleAtod(out.substr(at + key.size(), end - at - key.size()), &seconds)) return -1;
  return seconds;
}

absl::StatusOr<netemu::CommandResult> Job(std::vector<std::string> flags) {
  std::vector<std::string> argv = {GRAVACRUN_BIN, "-np", "2", "--nodes", "2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(),
              {"--", RUNNER_JOB_WORKER, "--steps", "2", "--bytes", std::to_string(kBytes)});
  return netemu::RunCommand(argv, {.netns = "", .env = {}, .timeout = absl::Seconds(120)});
}

TEST(GravacrunJobNetnsTest, DataCrossesTheShapedLink) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  const std::string probe = absl::StrCat("gvcprobe-job-", getpid());
  if (!netemu::RunChecked({"ip", "netns", "add", probe}).ok()) GTEST_SKIP() << "no netns here";
  ASSERT_TRUE(netemu::RunChecked({"ip", "netns", "del", probe}).ok());

  ASSERT_OK_AND_ASSIGN(netemu::CommandResult local, Job({}));
  ASSERT_EQ(local.status.exit_code, 0) << local.out << local.err;
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult linked, Job({"--link", "50mbit"}));
  ASSERT_EQ(linked.status.exit_code, 0) << linked.out << linked.err;
  EXPECT_THAT(linked.out, HasSubstr("[rank 1] rank 1 of 2 ok"));
  EXPECT_THAT(linked.err, HasSubstr("emulated cluster gravacrun-"));

  const double t_local = AllreduceSeconds(local.out);
  const double t_link = AllreduceSeconds(linked.out);
  const double t_wire = kBytes * 8.0 / kRate;  // bytes each node sends, at the link rate
  std::printf(
      "dense allreduce of %d bytes, 2 nodes: %.3f s local, %.3f s over 50 Mbit/s "
      "links (wire time %.3f s, ratio %.2f)\n",
      kBytes, t_local, t_link, t_wire, t_wire / t_link);
  ASSERT_GT(t_local, 0) << local.out;
  ASSERT_GT(t_link, 0) << linked.out;
  EXPECT_GE(t_link, 0.7 * t_wire);  // it really crossed the shaped link
}

}  // namespace
}  // namespace gravac::runner

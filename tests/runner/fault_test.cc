// Faults in real jobs under gravacrun (gravac-controller, gravacd per node, real worker
// processes), each with the bound the job must end or recover in. docs/FAULTS.md lists them.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/process.h"

namespace gravac::runner {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<netemu::CommandResult> Gravacrun(std::vector<std::string> flags,
                                                const std::string& worker,
                                                std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {GRAVACRUN_BIN};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.push_back(worker);
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return netemu::RunCommand(argv, {.netns = "", .env = {}, .timeout = absl::Seconds(120)});
}

// Finding 5 of issue 19: a worker registered a memfd, shrank it and posted an allreduce into
// it; gravacd died of SIGBUS and its node's other workers lost their daemon. Now the daemon
// refuses the unsealed segment: the attacker is told why, the daemon fails the node naming the
// attacker's rank (rank 0 gets that error, or — when the refusal came before rank 0 connected —
// gravacd exits with it), and nothing dies of a signal, all within 30 s.
TEST(FaultTest, WorkerShrinkingItsSegmentCannotCrashTheDaemon) {
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(netemu::CommandResult r,
                       Gravacrun({"-np", "2", "--nodes", "1", "--op_timeout_s", "10"},
                                 RUNNER_HOSTILE_WORKER, {"--hostile_rank", "1"}));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const std::string all = r.out + r.err;
  EXPECT_THAT(all, HasSubstr("staging segment refused: shared-memory segment is not sealed"));
  EXPECT_THAT(all, Not(HasSubstr("killed by signal")));
  EXPECT_THAT(all, Not(HasSubstr("Bus error")));  // UCX's handler prints SIGBUS so
  EXPECT_NE(r.status.exit_code, 0);
  EXPECT_THAT(all, HasSubstr("worker rank 1 (local rank 1"));
  EXPECT_THAT(r.out, Not(HasSubstr("rank 0: allreduce: GRAVAC_OK")));
}

}  // namespace
}  // namespace gravac::runner

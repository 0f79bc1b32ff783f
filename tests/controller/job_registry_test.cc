// JobRegistry: one Coordinator per job, ended run ids refused, ended jobs forgotten, status by
// name. Driven directly (no gRPC), with real Coordinators.
#include "controller/job_registry.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/coordinator_fixture.h"

namespace gravac::controller {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

using testing::Assemble;
using testing::Feed;

JobRegistryOptions Options() {
  JobRegistryOptions o;
  o.coordinator = testing::SmallSearch(/*nodes=*/2);
  o.retention = absl::Seconds(30);
  return o;
}

TEST(JobRegistryTest, EveryJobHasItsOwnCoordinatorAndDecisions) {
  ASSERT_OK_AND_ASSIGN(auto jobs, JobRegistry::Create(Options()));
  ASSERT_OK_AND_ASSIGN(auto a, jobs->ForJoin({"a", "1"}, 0));
  ASSERT_OK_AND_ASSIGN(auto b, jobs->ForJoin({"b", "1"}, 1));
  ASSERT_OK_AND_ASSIGN(auto a_again, jobs->ForJoin({"a", "1"}, 2));
  EXPECT_EQ(a, a_again);
  EXPECT_NE(a, b);
  // A rerun of a name with a new run id is a new job.
  ASSERT_OK_AND_ASSIGN(auto a2, jobs->ForJoin({"a", "2"}, 0));
  EXPECT_NE(a, a2);
  Assemble(*a, 2);
  Assemble(*b, 1);
  Feed(*a, 2, 0, 20);
  EXPECT_GE(a->Current().epoch, 2);
  EXPECT_EQ(b->Current().epoch, 0);  // b saw none of a's statistics or decisions
  EXPECT_EQ(b->Status().steps_observed, 0);
  EXPECT_EQ(a->Status().expected_nodes, 2);
  EXPECT_EQ(b->Status().expected_nodes, 1);

  const std::vector<JobSummaryInfo> list = jobs->List();
  ASSERT_THAT(list, SizeIs(3));
  EXPECT_EQ(list[0].id, (JobId{"a", "1"}));
  EXPECT_EQ(list[0].state, JobState::kRunning);
  EXPECT_EQ(list[2].id, (JobId{"a", "2"}));
  EXPECT_EQ(list[2].state, JobState::kAssembling);
  // Status by name: the newest run, or the one asked for.
  ASSERT_OK_AND_ASSIGN(JobSummaryInfo newest, jobs->Status("a", ""));
  EXPECT_EQ(newest.id.run_id, "2");
  ASSERT_OK_AND_ASSIGN(JobSummaryInfo first, jobs->Status("a", "1"));
  EXPECT_EQ(first.status.steps_observed, 20);
  EXPECT_THAT(jobs->Status("c", ""), StatusIs(absl::StatusCode::kNotFound, HasSubstr("'c'")));
}

TEST(JobRegistryTest, BadJoinsNameTheJob) {
  ASSERT_OK_AND_ASSIGN(auto jobs, JobRegistry::Create(Options()));
  ASSERT_THAT(jobs->ForJoin({"a", "1"}, 2), IsOk());
  EXPECT_THAT(jobs->ForJoin({"a", "1"}, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("job 'a' run '1'"), HasSubstr("2 nodes"))));
  EXPECT_THAT(jobs->ForJoin({"a b", "1"}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'a b'")));
  EXPECT_THAT(jobs->Find({"x", "9"}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("job 'x' run '9'")));
  // An empty name is the job "default".
  ASSERT_OK_AND_ASSIGN(auto d1, jobs->ForJoin({}, 0));
  ASSERT_OK_AND_ASSIGN(auto d2, jobs->ForJoin({"default", ""}, 0));
  EXPECT_EQ(d1, d2);
}

TEST(JobRegistryTest, AnEndedRunIsRefusedAndForgottenAfterRetention) {
  ASSERT_OK_AND_ASSIGN(auto jobs, JobRegistry::Create(Options()));
  ASSERT_OK_AND_ASSIGN(auto a, jobs->ForJoin({"a", "1"}, 2));
  ASSERT_OK_AND_ASSIGN(auto b, jobs->ForJoin({"b", "1"}, 1));
  Assemble(*a, 2);
  Assemble(*b, 1);
  EXPECT_THAT(jobs->Leave({"a", "1"}, 5), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(bool ended, jobs->Leave({"a", "1"}, 0));
  EXPECT_FALSE(ended);
  ASSERT_OK_AND_ASSIGN(ended, jobs->Leave({"a", "1"}, 1));
  EXPECT_TRUE(ended);
  EXPECT_THAT(jobs->ForJoin({"a", "1"}, 2),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       AllOf(HasSubstr("job 'a' run '1' ended"), HasSubstr("new run id"))));
  EXPECT_THAT(jobs->Find({"a", "1"}), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(JobSummaryInfo s, jobs->Status("a", ""));
  EXPECT_EQ(s.state, JobState::kEnded);
  // The other job runs on.
  Feed(*b, 1, 0, 3);
  EXPECT_EQ(b->Status().steps_observed, 3);

  jobs->Tick(absl::Now() + absl::Seconds(10));
  EXPECT_THAT(jobs->List(), SizeIs(2));
  jobs->Tick(absl::Now() + absl::Seconds(31));
  // a is forgotten (it ended more than 30 s before) but its run id stays refused; b, idle for
  // 21 s, is not abandoned yet.
  std::vector<JobSummaryInfo> left = jobs->List();
  ASSERT_THAT(left, SizeIs(1));
  EXPECT_EQ(left[0].id.name, "b");
  EXPECT_THAT(jobs->ForJoin({"a", "1"}, 2),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already ended")));
  EXPECT_THAT(jobs->ForJoin({"a", "2"}, 2), IsOk());
}

TEST(JobRegistryTest, AJobWithoutAnyDaemonConnectedIsAbandoned) {
  ASSERT_OK_AND_ASSIGN(auto jobs, JobRegistry::Create(Options()));
  ASSERT_OK_AND_ASSIGN(auto b, jobs->ForJoin({"b", "1"}, 1));
  Assemble(*b, 1);
  const absl::Time t0 = absl::Now();
  jobs->Tick(t0);  // no decision stream: idle from now
  jobs->Tick(t0 + absl::Seconds(20));
  ASSERT_OK_AND_ASSIGN(JobSummaryInfo s, jobs->Status("b", "1"));
  EXPECT_EQ(s.state, JobState::kRunning);
  jobs->Tick(t0 + absl::Seconds(31));
  ASSERT_OK_AND_ASSIGN(s, jobs->Status("b", "1"));
  EXPECT_EQ(s.state, JobState::kEnded);
  EXPECT_THAT(jobs->ForJoin({"b", "1"}, 1),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("abandoned")));
}

}  // namespace
// A node's failed session (FailJob) fails the job at once: its pending join ends with Aborted
// naming the job, the node and the reason, later joins get the same, the state is "failed"; a
// job nobody joined yet is refused likewise; other jobs run on; an ended job stays ended.
TEST(JobRegistryTest, AFailedNodeFailsItsJobAtOnceAndOnlyIt) {
  ASSERT_OK_AND_ASSIGN(auto jobs, JobRegistry::Create(Options()));
  ASSERT_OK_AND_ASSIGN(auto a, jobs->ForJoin({"a", "1"}, 2));
  ASSERT_OK_AND_ASSIGN(auto b, jobs->ForJoin({"b", "1"}, 2));
  Assemble(*b, 2);
  std::optional<absl::StatusOr<JoinReply>> pending;
  a->Join(testing::NodeJoin(1, 2), [&](absl::StatusOr<JoinReply> r) { pending = std::move(r); });
  EXPECT_FALSE(pending.has_value());  // node 0 never comes: it failed
  ASSERT_OK_AND_ASSIGN(bool failed, jobs->Fail({"a", "1"}, "n0", 0, "port range 1-1 exhausted"));
  EXPECT_TRUE(failed);
  ASSERT_TRUE(pending.has_value());
  EXPECT_THAT(*pending, StatusIs(absl::StatusCode::kAborted,
                                 AllOf(HasSubstr("job 'a' run '1' failed on node 'n0'"),
                                       HasSubstr("port range 1-1 exhausted"))));
  EXPECT_THAT(jobs->ForJoin({"a", "1"}, 2),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("failed on node 'n0'")));
  ASSERT_OK_AND_ASSIGN(JobSummaryInfo s, jobs->Status("a", "1"));
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_STREQ(JobStateName(s.state), "failed");
  EXPECT_THAT(s.failure, HasSubstr("node 'n0'"));
  ASSERT_OK_AND_ASSIGN(failed, jobs->Fail({"a", "1"}, "n1", 1, "again"));
  EXPECT_FALSE(failed);  // the first failure stays
  // b runs on.
  Feed(*b, 2, 0, 3);
  EXPECT_EQ(b->Status().steps_observed, 3);
  ASSERT_OK_AND_ASSIGN(s, jobs->Status("b", "1"));
  EXPECT_EQ(s.state, JobState::kRunning);
  // A job that failed before any node joined is refused with the failure.
  ASSERT_OK_AND_ASSIGN(failed, jobs->Fail({"c", "1"}, "n3", -1, "no workers"));
  EXPECT_TRUE(failed);
  EXPECT_THAT(jobs->ForJoin({"c", "1"}, 2),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("job 'c' run '1' failed on node 'n3'"),
                             HasSubstr("no workers"))));
  // ... and listed as failed (no nodes, no steps) until `retention` after its failure.
  ASSERT_OK_AND_ASSIGN(s, jobs->Status("c", "1"));
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_THAT(s.failure, HasSubstr("failed on node 'n3': no workers"));
  EXPECT_EQ(s.status.joined_nodes, 0);
  EXPECT_EQ(s.status.steps_observed, 0);
  ASSERT_TRUE(s.ended.has_value());
  EXPECT_EQ(jobs->List().size(), 3u);
  jobs->Tick(*s.ended + absl::Seconds(29));
  EXPECT_EQ(jobs->List().size(), 3u);
  // A job that ended normally is not failed afterwards.
  ASSERT_OK_AND_ASSIGN(bool ended, jobs->Leave({"b", "1"}, 0));
  ASSERT_OK_AND_ASSIGN(ended, jobs->Leave({"b", "1"}, 1));
  EXPECT_TRUE(ended);
  ASSERT_OK_AND_ASSIGN(failed, jobs->Fail({"b", "1"}, "n0", 0, "late"));
  EXPECT_FALSE(failed);
  ASSERT_OK_AND_ASSIGN(s, jobs->Status("b", "1"));
  EXPECT_EQ(s.state, JobState::kEnded);
  EXPECT_THAT(jobs->Fail({"a b", "1"}, "n0", 0, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Past retention every ended job is forgotten, the one that never had a node too; its run id
  // stays refused.
  jobs->Tick(absl::Now() + absl::Seconds(31));
  EXPECT_THAT(jobs->Status("c", "1"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(jobs->List().empty());
  EXPECT_THAT(jobs->ForJoin({"c", "1"}, 2), StatusIs(absl::StatusCode::kAborted));
}

}  // namespace gravac::controller

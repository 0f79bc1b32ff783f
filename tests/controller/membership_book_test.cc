// MembershipBook (issue 22): versioned memberships of elastic jobs over a real JobRegistry and
// its Coordinators. Rounds complete when every node asked or at the regroup timeout (Tick with a
// time past it); errors reach every asker of a round.
#include "controller/membership_book.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "controller/job_registry.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/coordinator_fixture.h"

namespace gravac::controller {
namespace {

using ::gravac::testing::IsOk;
using ::gravac::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(5);
const JobId kJob{"train", "r1"};

struct Answer {
  std::optional<absl::StatusOr<MembershipInfo>> result;
};

class MembershipBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobRegistryOptions o;
    o.coordinator = testing::SmallSearch(3);
    auto made = JobRegistry::Create(o);
    ASSERT_THAT(made.status(), IsOk());
    jobs_ = *std::move(made);
    book_ = std::make_unique<MembershipBook>(jobs_.get(), kTimeout, nullptr);
  }

  // Membership 0: `nodes` nodes n0.. with `per_node` ranks each, assembled as run r1.
  void AssembleFirst(int nodes, int per_node) {
    auto c = jobs_->ForJoin(kJob, nodes);
    ASSERT_THAT(c.status(), IsOk());
    testing::Assemble(**c, nodes, per_node);
    coordinator_ = *c;
  }

  Answer* Ask(const std::string& node, int local, int64_t from, int min_size = 0,
              int max_size = 0, std::vector<std::string> expect = {}) {
    answers_.push_back(std::make_unique<Answer>());
    Answer* a = answers_.back().get();
    book_->Regroup({.job = kJob,
                    .node_name = node,
                    .local_count = local,
                    .from_version = from,
                    .min_size = min_size,
                    .max_size = max_size,
                    .expect_nodes = std::move(expect)},
                   [a](absl::StatusOr<MembershipInfo> m) { a->result = std::move(m); });
    return a;
  }

  void PassTimeout() { book_->Tick(absl::Now() + kTimeout + absl::Seconds(1)); }

  std::unique_ptr<JobRegistry> jobs_;
  std::unique_ptr<MembershipBook> book_;
  std::shared_ptr<Coordinator> coordinator_;
  std::vector<std::unique_ptr<Answer>> answers_;
};

TEST_F(MembershipBookTest, LostNodeIsDroppedAtTheTimeoutAndRanksAreDense) {
  AssembleFirst(3, 2);
  Answer* a0 = Ask("n0", 2, 0);
  Answer* a2 = Ask("n2", 2, 0);
  book_->Tick(absl::Now());
  EXPECT_FALSE(a0->result.has_value()) << "complete before n1 asked or the timeout passed";
  PassTimeout();
  ASSERT_TRUE(a0->result.has_value() && a2->result.has_value());
  ASSERT_THAT(a0->result->status(), IsOk());
  ASSERT_THAT(a2->result->status(), IsOk());
  const MembershipInfo& m0 = **a0->result;
  const MembershipInfo& m2 = **a2->result;
  EXPECT_EQ(m0.version, 1);
  EXPECT_EQ(m0.run_id, "r1.m1");
  EXPECT_EQ(m0.world_size, 4);
  EXPECT_THAT(m0.lost_nodes, ElementsAre("n1"));
  EXPECT_EQ(m0.node_rank, 0);
  EXPECT_EQ(m2.node_rank, 1);  // n2 moves up: dense node ranks
  ASSERT_EQ(m2.nodes.size(), 2u);
  EXPECT_EQ(m2.nodes[1].node_name, "n2");
  EXPECT_EQ(m2.nodes[1].first_rank, 2);  // ranks 4-5 became 2-3
  // The new run exists, waiting for the daemons of the new membership.
  EXPECT_THAT(jobs_->Find({"train", "r1.m1"}).status(), IsOk());
}

TEST_F(MembershipBookTest, RoundCompletesAtOnceWhenEveryNodeAsked) {
  AssembleFirst(2, 1);
  Answer* a0 = Ask("n0", 1, 0);
  EXPECT_FALSE(a0->result.has_value());
  Answer* a1 = Ask("n1", 1, 0);
  ASSERT_TRUE(a0->result.has_value() && a1->result.has_value());
  ASSERT_THAT(a1->result->status(), IsOk());
  EXPECT_EQ((*a1->result)->world_size, 2);
  EXPECT_TRUE((*a1->result)->lost_nodes.empty());
}

TEST_F(MembershipBookTest, DecisionEpochsKeepGrowingAcrossMemberships) {
  AssembleFirst(2, 1);
  testing::Feed(*coordinator_, 2, 0, 12);  // warm-up and search: several decisions
  const int64_t before = coordinator_->Current().epoch;
  ASSERT_GT(before, 0);
  Ask("n0", 1, 0);
  PassTimeout();
  auto next = jobs_->Find({"train", "r1.m1"});
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_EQ((*next)->Current().epoch, before + 1);
  EXPECT_EQ((*next)->Status().epoch_base, before);
}

TEST_F(MembershipBookTest, BelowMinSizeFailsEveryAskerNamingTheLostNodes) {
  AssembleFirst(3, 1);
  Answer* a0 = Ask("n0", 1, 0, /*min_size=*/2);
  PassTimeout();
  ASSERT_TRUE(a0->result.has_value());
  EXPECT_THAT(a0->result->status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("below the minimum of 2"), HasSubstr("lost nodes: n1, n2"))));
  // The job is over: a late asker gets the same answer, no second membership forms.
  Answer* late = Ask("n1", 1, 0);
  ASSERT_TRUE(late->result.has_value());
  EXPECT_THAT(late->result->status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("lost nodes: n1, n2")));
  EXPECT_THAT(jobs_->Find({"train", "r1.m1"}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(MembershipBookTest, StaleVersionIsRefusedAfterTwoQuickChanges) {
  AssembleFirst(3, 1);
  Ask("n0", 1, 0);
  Ask("n1", 1, 0);
  PassTimeout();  // membership 1: n0, n1 (n2 lost)
  Answer* b0 = Ask("n0", 1, 1);
  PassTimeout();  // membership 2: n0 (n1 lost too)
  ASSERT_TRUE(b0->result.has_value());
  ASSERT_THAT(b0->result->status(), IsOk());
  EXPECT_EQ((*b0->result)->version, 2);
  EXPECT_EQ((*b0->result)->run_id, "r1.m2");
  EXPECT_THAT((*b0->result)->lost_nodes, ElementsAre("n1"));
  // n2 comes back with the version it was in: stale, refused at once, no third membership.
  Answer* stale = Ask("n2", 1, 0);
  ASSERT_TRUE(stale->result.has_value());
  EXPECT_THAT(stale->result->status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("membership 0"), HasSubstr("at membership 2"),
                             HasSubstr("stale"))));
  Answer* future = Ask("n0", 1, 7);
  EXPECT_THAT(future->result->status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(MembershipBookTest, NewNodesJoinAfterTheSurvivorsUpToMaxSize) {
  AssembleFirst(2, 1);
  Answer* n5 = Ask("n5", 2, -1, 0, /*max_size=*/5);
  Answer* n6 = Ask("n6", 2, -1, 0, 5);
  Answer* a0 = Ask("n0", 1, 0, 0, 5);
  Answer* a1 = Ask("n1", 1, 0, 0, 5);
  ASSERT_TRUE(a1->result.has_value() && n5->result.has_value() && n6->result.has_value());
  ASSERT_THAT(a0->result->status(), IsOk());
  EXPECT_EQ((*a0->result)->world_size, 4);
  EXPECT_THAT((*a0->result)->added_nodes, ElementsAre("n5"));
  ASSERT_THAT(n5->result->status(), IsOk());
  EXPECT_EQ((*n5->result)->node_rank, 2);
  EXPECT_EQ((*n5->result)->nodes[2].first_rank, 2);
  EXPECT_THAT(n6->result->status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--max-np")));
}

TEST_F(MembershipBookTest, NewNodeAloneWaitsForTheMembersInsteadOfDroppingThem) {
  AssembleFirst(2, 1);
  Answer* n2 = Ask("n2", 1, -1);
  PassTimeout();  // no member asked: no round, no lost members
  EXPECT_FALSE(n2->result.has_value());
  Answer* a0 = Ask("n0", 1, 0);
  Answer* a1 = Ask("n1", 1, 0);
  ASSERT_TRUE(a0->result.has_value() && a1->result.has_value() && n2->result.has_value());
  ASSERT_THAT(n2->result->status(), IsOk());
  EXPECT_EQ((*n2->result)->world_size, 3);
  EXPECT_THAT((*n2->result)->lost_nodes, ::testing::IsEmpty());
  EXPECT_THAT((*n2->result)->added_nodes, ElementsAre("n2"));
}

TEST_F(MembershipBookTest, HostUpdateWaitsForTheExpectedNewNodePastTheTimeout) {
  AssembleFirst(2, 1);
  const std::vector<std::string> grown = {"n0", "n1", "n2"};
  Answer* a0 = Ask("n0", 1, 0, 0, 0, grown);
  Answer* a1 = Ask("n1", 1, 0, 0, 0, grown);
  EXPECT_FALSE(a0->result.has_value());  // every member asked, but n2 is still starting
  PassTimeout();                         // past regroup_timeout, within new_node_wait
  EXPECT_FALSE(a0->result.has_value());
  Answer* n2 = Ask("n2", 2, -1);
  ASSERT_TRUE(a0->result.has_value() && a1->result.has_value() && n2->result.has_value());
  ASSERT_THAT(a1->result->status(), IsOk());
  EXPECT_EQ((*a1->result)->version, 1);
  EXPECT_EQ((*a1->result)->world_size, 4);
  EXPECT_EQ((*n2->result)->node_rank, 2);
  EXPECT_EQ((*n2->result)->nodes[2].first_rank, 2);
}

TEST_F(MembershipBookTest, HostUpdateGivesUpOnAnExpectedNodeAfterTheNewNodeWait) {
  book_ = std::make_unique<MembershipBook>(jobs_.get(), kTimeout, nullptr, absl::Seconds(20));
  AssembleFirst(2, 1);
  Answer* a0 = Ask("n0", 1, 0, 0, 0, {"n0", "n1", "n9"});
  Answer* a1 = Ask("n1", 1, 0, 0, 0, {"n0", "n1", "n9"});
  PassTimeout();
  EXPECT_FALSE(a0->result.has_value());
  book_->Tick(absl::Now() + absl::Seconds(21));
  ASSERT_TRUE(a0->result.has_value() && a1->result.has_value());
  ASSERT_THAT(a0->result->status(), IsOk());
  EXPECT_EQ((*a0->result)->world_size, 2);  // the same nodes, one membership further
  EXPECT_THAT((*a0->result)->added_nodes, ::testing::IsEmpty());
}

TEST_F(MembershipBookTest, RemovedHostIsNotWaitedFor) {
  AssembleFirst(3, 1);
  Answer* a0 = Ask("n0", 1, 0, 0, 0, {"n0", "n2"});
  EXPECT_FALSE(a0->result.has_value());
  Answer* a2 = Ask("n2", 1, 0, 0, 0, {"n0", "n2"});
  ASSERT_TRUE(a0->result.has_value() && a2->result.has_value());  // at once: n1 was removed
  ASSERT_THAT(a2->result->status(), IsOk());
  EXPECT_EQ((*a2->result)->world_size, 2);
  EXPECT_EQ((*a2->result)->node_rank, 1);
  EXPECT_THAT((*a2->result)->lost_nodes, ElementsAre("n1"));
}

TEST_F(MembershipBookTest, BadAsksAreRefusedAtOnce) {
  Answer* unknown = Ask("n0", 1, 0);
  ASSERT_TRUE(unknown->result.has_value());
  EXPECT_THAT(unknown->result->status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not known")));
  AssembleFirst(2, 1);
  Answer* zero = Ask("n0", 0, 0);
  EXPECT_THAT(zero->result->status(), StatusIs(absl::StatusCode::kInvalidArgument));
  Ask("n0", 1, 0);
  Answer* twice = Ask("n0", 1, 0);
  EXPECT_THAT(twice->result->status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("asked twice")));
}

TEST_F(MembershipBookTest, CancelledAskerLeavesTheRound) {
  AssembleFirst(2, 1);
  Answer* a0 = Ask("n0", 1, 0);
  book_->Cancel(1);
  ASSERT_TRUE(a0->result.has_value());
  EXPECT_THAT(a0->result->status(), StatusIs(absl::StatusCode::kCancelled));
  PassTimeout();  // nothing left to complete: no membership 1
  EXPECT_THAT(jobs_->Find({"train", "r1.m1"}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace gravac::controller

// Coordinator: membership and join validation, per-step combination of the nodes' statistics,
// decisions published to subscribers (with the delay hook), bounded memory, restart, shutdown.
#include "controller/coordinator.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "controller/policy/gravac_policy.h"
#include "core/testing/status_matchers.h"
#include "core/testing/step_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::controller {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

// Records what a JoinCallback received.
struct JoinSlot {
  std::optional<absl::StatusOr<JoinReply>> result;
  JoinCallback callback() {
    return [this](absl::StatusOr<JoinReply> r) { result = std::move(r); };
  }
};

class FakeSubscriber : public DecisionSubscriber {
 public:
  void OnDecision(const JobDecision& d) override { decisions.push_back(d); }
  void OnEnd(const absl::Status& s) override { end = s; }
  std::vector<JobDecision> decisions;
  std::optional<absl::Status> end;
};

JoinRequestInfo Node(std::string name, int first, int count, int world) {
  JoinRequestInfo r;
  r.node_name = std::move(name);
  r.first_rank = first;
  r.local_count = count;
  r.world_size = world;
  r.transport_address = "addr-" + r.node_name;
  return r;
}

// A small policy whose decisions change within a few steps: warm-up 2 steps, 4 steps per
// candidate, θ in [10, 40].
policy::PolicyConfig FastPolicy() {
  policy::PolicyConfig p;
  p.theta_min = 10;
  p.theta_max = 40;
  p.window = 2;
  p.eval_steps = 4;
  p.alpha = 0.0;
  p.epsilon = 0.5;
  p.omega = 0.01;
  return p;
}

CoordinatorOptions Options(int nodes) {
  CoordinatorOptions o;
  o.nodes = nodes;
  o.policy = FastPolicy();
  o.join_timeout = absl::Seconds(10);
  return o;
}

std::unique_ptr<Coordinator> Make(CoordinatorOptions o) {
  auto c = Coordinator::Create(std::move(o));
  EXPECT_THAT(c, IsOk());
  return c.ok() ? std::move(c).value() : nullptr;
}

// Assembles a job of `nodes` nodes with 2 ranks each.
void Assemble(Coordinator& c, int nodes) {
  std::vector<JoinSlot> slots(nodes);
  for (int i = 0; i < nodes; ++i) {
    c.Join(Node("n" + std::to_string(i), 2 * i, 2, 2 * nodes), slots[i].callback());
  }
  for (auto& s : slots) ASSERT_TRUE(s.result.has_value() && s.result->ok());
}

NodeStepStats Stats(int node, int64_t step, const JobDecision& d, double seconds = 0.1) {
  NodeStepStats figures = ::gravac::testing::kStepFigures;
  figures.step_seconds = seconds;
  return ::gravac::testing::StepUnder(d, node, step, figures);
}

TEST(CoordinatorJoin, AssemblesAndNumbersNodesByFirstRank) {
  auto c = Make(Options(2));
  JoinSlot b, a;
  c->Join(Node("b", 2, 2, 4), b.callback());
  EXPECT_FALSE(b.result.has_value());
  EXPECT_FALSE(c->assembled());
  EXPECT_EQ(c->Status().joined_nodes, 1);
  c->Join(Node("a", 0, 2, 4), a.callback());
  ASSERT_TRUE(a.result.has_value() && b.result.has_value());
  ASSERT_THAT(*a.result, IsOk());
  ASSERT_THAT(*b.result, IsOk());
  EXPECT_EQ((*a.result)->node_rank, 0);
  EXPECT_EQ((*b.result)->node_rank, 1);
  const JoinReply& r = **b.result;
  ASSERT_THAT(r.nodes, SizeIs(2));
  EXPECT_EQ(r.nodes[0].node_name, "a");
  EXPECT_EQ(r.nodes[0].transport_address, "addr-a");
  EXPECT_EQ(r.nodes[1].first_rank, 2);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.job.theta_min, 10);
  EXPECT_EQ(r.job.theta_max, 40);
  EXPECT_EQ(r.job.compressor, "topk");
  EXPECT_EQ(r.job.sparse_values, "fp32");  // the default
  EXPECT_EQ(r.decision.epoch, 0);
  EXPECT_EQ(r.decision.theta, 10);
  EXPECT_EQ(r.decision.phase, "warmup");
  EXPECT_TRUE(c->assembled());
}

TEST(CoordinatorJoin, DuplicateNodeNameFailsEveryJoiner) {
  auto c = Make(Options(3));
  JoinSlot a, dup;
  c->Join(Node("a", 0, 1, 3), a.callback());
  c->Join(Node("a", 1, 1, 3), dup.callback());
  for (JoinSlot* s : {&a, &dup}) {
    ASSERT_TRUE(s->result.has_value());
    EXPECT_THAT(*s->result,
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate node_name 'a'")));
  }
  EXPECT_EQ(c->Status().joined_nodes, 0);  // the round starts over
}

TEST(CoordinatorJoin, OverlappingRanksNameBothNodes) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  c->Join(Node("a", 0, 3, 4), a.callback());
  c->Join(Node("b", 2, 2, 4), b.callback());
  for (JoinSlot* s : {&a, &b}) {
    ASSERT_TRUE(s->result.has_value());
    EXPECT_THAT(*s->result,
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("overlapping ranks"), HasSubstr("node 'a' (ranks 0..2"),
                               HasSubstr("node 'b' (ranks 2..3"))));
  }
}

// Daemons of different builds (data-plane protocols) never form a job: the round fails on both,
// naming both nodes and versions; equal protocols assemble, and a daemon of another build cannot
// take an assembled node's place.
TEST(CoordinatorJoin, DifferentDataPlaneProtocolsNameBothNodes) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  JoinRequestInfo old_build = Node("a", 0, 2, 4), new_build = Node("b", 2, 2, 4);
  old_build.data_plane_protocol = 0;
  new_build.data_plane_protocol = 1;
  c->Join(old_build, a.callback());
  c->Join(new_build, b.callback());
  for (JoinSlot* s : {&a, &b}) {
    ASSERT_TRUE(s->result.has_value());
    EXPECT_THAT(*s->result,
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("different gravac builds"),
                               HasSubstr("node 'a' speaks data-plane protocol 0"),
                               HasSubstr("node 'b' protocol 1"))));
  }
  EXPECT_EQ(c->Status().joined_nodes, 0);

  JoinSlot a1, b1, again;
  old_build.data_plane_protocol = 1;
  c->Join(old_build, a1.callback());
  c->Join(new_build, b1.callback());
  ASSERT_TRUE(a1.result.has_value() && b1.result.has_value());
  EXPECT_THAT(*a1.result, IsOk());
  EXPECT_THAT(*b1.result, IsOk());
  new_build.data_plane_protocol = 2;  // node 'b' restarted with another build
  c->Join(new_build, again.callback());
  ASSERT_TRUE(again.result.has_value());
  EXPECT_THAT(*again.result, StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("already assembled")));
}

TEST(CoordinatorJoin, WorldSizeDisagreement) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  c->Join(Node("a", 0, 2, 4), a.callback());
  c->Join(Node("b", 2, 2, 5), b.callback());
  for (JoinSlot* s : {&a, &b}) {
    EXPECT_THAT(*s->result, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("world_size disagrees: node 'a' says 4, node "
                                               "'b' says 5")));
  }
}

TEST(CoordinatorJoin, MissingRanksOnceEveryNodeJoined) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  c->Join(Node("a", 0, 1, 4), a.callback());
  c->Join(Node("b", 2, 2, 4), b.callback());
  for (JoinSlot* s : {&a, &b}) {
    EXPECT_THAT(*s->result, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("ranks 1..1 of world size 4 are missing")));
  }
}

TEST(CoordinatorJoin, RanksCoveredByFewerNodesThanExpected) {
  auto c = Make(Options(3));
  JoinSlot a, b;
  c->Join(Node("a", 0, 2, 4), a.callback());
  c->Join(Node("b", 2, 2, 4), b.callback());
  EXPECT_THAT(*b.result,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expects 3 nodes (--nodes)")));
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CoordinatorJoin, RankRangeOutsideTheWorld) {
  auto c = Make(Options(2));
  JoinSlot a;
  c->Join(Node("a", 3, 2, 4), a.callback());
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("node 'a' (ranks 3..4 of 4)")));
}

TEST(CoordinatorJoin, TimeoutNamesTheMissingRanks) {
  auto c = Make(Options(2));
  JoinSlot a;
  const absl::Time start = absl::Now();
  c->Join(Node("a", 0, 1, 4), a.callback());
  c->ExpireJoins(start + absl::Seconds(5));
  EXPECT_FALSE(a.result.has_value());
  c->ExpireJoins(start + absl::Seconds(11));
  ASSERT_TRUE(a.result.has_value());
  EXPECT_THAT(*a.result,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("1 of 2 nodes joined (a)"), HasSubstr("ranks 1..3"))));
}

TEST(CoordinatorJoin, CancelledJoinerIsForgotten) {
  auto c = Make(Options(2));
  JoinSlot a1, a2, b;
  const int64_t ticket = c->Join(Node("a", 0, 2, 4), a1.callback());
  c->CancelJoin(ticket);
  EXPECT_THAT(*a1.result, StatusIs(absl::StatusCode::kCancelled));
  c->Join(Node("a", 0, 2, 4), a2.callback());  // the same node again: no duplicate
  c->Join(Node("b", 2, 2, 4), b.callback());
  EXPECT_THAT(*a2.result, IsOk());
  EXPECT_THAT(*b.result, IsOk());
}

TEST(CoordinatorJoin, RejoinToAssembledJobAnswersAtOnce) {
  auto c = Make(Options(2));
  Assemble(*c, 2);
  JoinRequestInfo again = Node("n1", 2, 2, 4);
  again.rejoin = true;
  again.node_rank = 1;
  JoinSlot ok, bad;
  c->Join(again, ok.callback());
  ASSERT_TRUE(ok.result.has_value());
  ASSERT_THAT(*ok.result, IsOk());
  EXPECT_EQ((*ok.result)->node_rank, 1);
  c->Join(Node("n9", 4, 2, 6), bad.callback());
  EXPECT_THAT(*bad.result,
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already assembled")));
}

TEST(CoordinatorStats, CombinesNodesPerStep) {
  auto c = Make(Options(2));
  Assemble(*c, 2);
  const JobDecision d = c->Current();
  ASSERT_THAT(c->ReportStats(Stats(0, 0, d, 0.1)), IsOk());
  EXPECT_EQ(c->Status().steps_observed, 0);  // node 1 has not reported step 0
  ASSERT_THAT(c->ReportStats(Stats(1, 0, d, 0.25)), IsOk());
  const JobStatusInfo s = c->Status();
  EXPECT_EQ(s.steps_observed, 1);
  EXPECT_EQ(s.last_step, 0);
  EXPECT_DOUBLE_EQ(s.last_step_seconds, 0.25);  // the slowest node
  EXPECT_DOUBLE_EQ(s.throughput, 64 / 0.25);    // samples summed
  EXPECT_EQ(s.bytes_sent, 200);
  EXPECT_EQ(s.bytes_dense, 2000);
  EXPECT_EQ(s.nodes[1].last_step, 0);
  ASSERT_THAT(s.throughput_table, SizeIs(0));  // warm-up: nothing recorded yet
}

TEST(CoordinatorStats, RejectsDuplicatesUnknownNodesAndStaleSteps) {
  auto c = Make(Options(2));
  NodeStepStats early = Stats(0, 0, c->Current());
  EXPECT_THAT(c->ReportStats(early), StatusIs(absl::StatusCode::kFailedPrecondition));
  Assemble(*c, 2);
  const JobDecision d = c->Current();
  ASSERT_THAT(c->ReportStats(Stats(0, 5, d)), IsOk());
  EXPECT_THAT(c->ReportStats(Stats(0, 5, d)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 0 reported step 5 "
                                                                     "twice")));
  EXPECT_THAT(c->ReportStats(Stats(7, 5, d)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("node rank 7")));
  NodeStepStats bad = Stats(1, 5, d);
  bad.n_g = -1;
  EXPECT_THAT(c->ReportStats(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(c->ReportStats(Stats(1, 5, d)), IsOk());
  EXPECT_EQ(c->Status().steps_observed, 1);
  // Step 3 can no longer be observed after step 5: ignored.
  ASSERT_THAT(c->ReportStats(Stats(0, 3, d)), IsOk());
  ASSERT_THAT(c->ReportStats(Stats(1, 3, d)), IsOk());
  EXPECT_EQ(c->Status().steps_observed, 1);
}

TEST(CoordinatorStats, ThetaDisagreementIsRefused) {
  auto c = Make(Options(2));
  Assemble(*c, 2);
  JobDecision d = c->Current();
  ASSERT_THAT(c->ReportStats(Stats(0, 0, d)), IsOk());
  d.theta = 20;
  ASSERT_THAT(c->ReportStats(Stats(1, 0, d)), IsOk());
  const JobStatusInfo s = c->Status();
  EXPECT_EQ(s.steps_rejected, 1);
  EXPECT_EQ(s.steps_observed, 0);
}

TEST(CoordinatorStats, MemoryStaysBoundedWhenANodeNeverReports) {
  CoordinatorOptions o = Options(2);
  o.max_pending_steps = 8;
  auto c = Make(o);
  Assemble(*c, 2);
  const JobDecision d = c->Current();
  for (int64_t step = 0; step < 100; ++step) ASSERT_THAT(c->ReportStats(Stats(0, step, d)), IsOk());
  EXPECT_EQ(c->Status().steps_incomplete, 92);  // at most 8 are kept
  // The newest kept step still completes; the older kept ones can no longer be observed.
  ASSERT_THAT(c->ReportStats(Stats(1, 99, d)), IsOk());
  const JobStatusInfo s = c->Status();
  EXPECT_EQ(s.steps_observed, 1);
  EXPECT_EQ(s.steps_incomplete, 99);
  EXPECT_EQ(s.last_step, 99);
}

// Feeds steps [from, to) from every node, following the decision in force like a daemon.
void Feed(Coordinator& c, int nodes, int64_t from, int64_t to) {
  for (int64_t step = from; step < to; ++step) {
    const JobDecision d = c.Current();
    for (int n = 0; n < nodes; ++n) ASSERT_THAT(c.ReportStats(Stats(n, step, d)), IsOk());
  }
}

TEST(CoordinatorDecisions, PublishesTheDecisionsOfThePolicyOnCombinedStats) {
  auto c = Make(Options(2));
  Assemble(*c, 2);
  FakeSubscriber s0, s1;
  ASSERT_OK_AND_ASSIGN(int64_t id0, c->Subscribe(0, &s0));
  ASSERT_OK_AND_ASSIGN(int64_t id1, c->Subscribe(1, &s1));
  ASSERT_THAT(s0.decisions, SizeIs(1));  // the current decision at once
  EXPECT_EQ(s0.decisions[0].epoch, 0);

  // The same steps fed to a policy directly, combined by hand (norms summed, slowest time).
  ASSERT_OK_AND_ASSIGN(policy::GravacPolicy reference, policy::GravacPolicy::Create(FastPolicy()));
  std::vector<policy::Decision> expected;
  for (int64_t step = 0; step < 30; ++step) {
    const JobDecision d = c->Current();
    for (int n = 0; n < 2; ++n) ASSERT_THAT(c->ReportStats(Stats(n, step, d)), IsOk());
    const policy::Decision before = reference.current();
    ASSERT_OK_AND_ASSIGN(policy::Decision r, reference.Observe({step, d.theta, d.theta_candidate,
                                                                2.0, 1.8, 1.6, 0.1, 64}));
    if (r.epoch != before.epoch) expected.push_back(r);
  }
  ASSERT_GE(expected.size(), 2u);
  ASSERT_EQ(s0.decisions.size(), expected.size() + 1);
  for (size_t i = 0; i < expected.size(); ++i) {
    const JobDecision& got = s0.decisions[i + 1];
    EXPECT_EQ(got.epoch, static_cast<int64_t>(i + 1));
    EXPECT_EQ(got.theta, expected[i].theta);
    EXPECT_EQ(got.theta_candidate, expected[i].theta_candidate);
    EXPECT_EQ(got.first_step, expected[i].first_step);
    EXPECT_EQ(got.phase, policy::PhaseName(expected[i].phase));
    EXPECT_EQ(got.searching, expected[i].searching);
  }
  EXPECT_EQ(s1.decisions.size(), s0.decisions.size());
  EXPECT_EQ(c->Current().epoch, static_cast<int64_t>(expected.size()));
  EXPECT_DOUBLE_EQ(c->Current().gain_c, reference.current().gain_c);
  EXPECT_TRUE(c->Status().nodes[0].watching);

  c->Unsubscribe(id0);
  c->Unsubscribe(id1);
  EXPECT_FALSE(c->Status().nodes[0].watching);
}

// The decision log names a gain whose trackers are still filling instead of printing 0.000 for it:
// a new candidate's gain is not measured when the epoch that introduces it starts.
TEST(CoordinatorDecisions, LogSaysANewCandidatesGainIsNotMeasuredYet) {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* sink = open_memstream(&text, &size);
  ASSERT_NE(sink, nullptr);
  {
    Logger log("controller", LogLevel::kInfo, sink);
    CoordinatorOptions o = Options(2);
    o.policy.min_dwell = 0;
    o.log = &log;
    auto c = Make(o);
    Assemble(*c, 2);
    Feed(*c, 2, 0, 12);  // warm-up ends after step 1, θ_c 10 → 20 after step 3, → 40 after 7
  }
  std::fclose(sink);
  const std::string out(text, size);
  std::free(text);
  EXPECT_THAT(out, HasSubstr("theta_c 20 phase searching (searching) gain_min 0.900 gain_c not "
                             "measured yet"));
  EXPECT_THAT(out, HasSubstr("gain_c 0.800"));  // θ_c = 20 once its tracker is full
  EXPECT_THAT(out, Not(HasSubstr("gain_c 0.000")));
}

TEST(CoordinatorDecisions, DelayHookHoldsDeliveriesToOneNode) {
  CoordinatorOptions o = Options(2);
  o.decision_delay = {{1, absl::Milliseconds(300)}};
  auto c = Make(o);
  Assemble(*c, 2);
  FakeSubscriber s0, s1;
  const absl::Time t0 = absl::Now();
  ASSERT_THAT(c->Subscribe(0, &s0), IsOk());
  ASSERT_THAT(c->Subscribe(1, &s1), IsOk());
  EXPECT_THAT(s0.decisions, SizeIs(1));
  EXPECT_THAT(s1.decisions, SizeIs(0));
  ASSERT_TRUE(c->NextDelivery().has_value());
  EXPECT_GE(*c->NextDelivery(), t0 + absl::Milliseconds(300));
  Feed(*c, 2, 0, 3);  // warm-up ends: epoch 1
  EXPECT_THAT(s0.decisions, SizeIs(2));
  EXPECT_THAT(s1.decisions, SizeIs(0));
  c->DeliverDue(t0 + absl::Milliseconds(100));
  EXPECT_THAT(s1.decisions, SizeIs(0));
  c->DeliverDue(absl::Now() + absl::Milliseconds(301));
  ASSERT_THAT(s1.decisions, SizeIs(2));
  EXPECT_EQ(s1.decisions[0].epoch, 0);
  EXPECT_EQ(s1.decisions[1].epoch, 1);
  EXPECT_FALSE(c->NextDelivery().has_value());
}

TEST(CoordinatorDecisions, SubscribeNeedsAJobNode) {
  auto c = Make(Options(2));
  FakeSubscriber s;
  EXPECT_THAT(c->Subscribe(0, &s), StatusIs(absl::StatusCode::kFailedPrecondition));
  Assemble(*c, 2);
  EXPECT_THAT(c->Subscribe(2, &s),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("node rank 2")));
}

TEST(CoordinatorRestart, ContinuesEpochsAboveTheHighestReported) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  JoinRequestInfo ra = Node("n0", 0, 2, 4);
  ra.rejoin = true;
  ra.node_rank = 0;
  ra.newest_epoch = 7;
  ra.last_step = 40;
  JoinRequestInfo rb = Node("n1", 2, 2, 4);
  rb.rejoin = true;
  rb.node_rank = 1;
  rb.newest_epoch = 6;  // it had not received epoch 7 yet
  rb.last_step = 39;
  c->Join(rb, b.callback());
  c->Join(ra, a.callback());
  ASSERT_THAT(*a.result, IsOk());
  ASSERT_THAT(*b.result, IsOk());
  EXPECT_EQ((*a.result)->decision.epoch, 8);
  EXPECT_EQ((*b.result)->decision.epoch, 8);
  EXPECT_EQ((*b.result)->decision.first_step, 41);
  EXPECT_EQ(c->Status().epoch_base, 7);
  FakeSubscriber s;
  ASSERT_THAT(c->Subscribe(1, &s), IsOk());
  ASSERT_THAT(s.decisions, SizeIs(1));
  EXPECT_EQ(s.decisions[0].epoch, 8);
  // Older steps are ignored, and so are steps run under the previous controller's epochs;
  // newer ones drive the policy, and epochs continue from 8.
  Feed(*c, 2, 30, 35);
  EXPECT_EQ(c->Status().steps_observed, 0);
  JobDecision old = c->Current();
  old.epoch = 7;
  for (int n = 0; n < 2; ++n) ASSERT_THAT(c->ReportStats(Stats(n, 41, old)), IsOk());
  EXPECT_EQ(c->Status().steps_observed, 0);
  EXPECT_EQ(c->Status().steps_rejected, 1);
  Feed(*c, 2, 42, 47);
  EXPECT_EQ(c->Status().steps_observed, 5);
  ASSERT_GE(s.decisions.size(), 2u);
  EXPECT_EQ(s.decisions[1].epoch, 9);
}

TEST(CoordinatorRestart, RejoinWithAWrongNodeRankFails) {
  auto c = Make(Options(2));
  JoinSlot a, b;
  JoinRequestInfo ra = Node("n0", 0, 2, 4);
  ra.rejoin = true;
  ra.node_rank = 1;
  c->Join(ra, a.callback());
  c->Join(Node("n1", 2, 2, 4), b.callback());
  EXPECT_THAT(*a.result,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("re-joins as node rank 1")));
  EXPECT_THAT(*b.result, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CoordinatorShutdown, EndsStreamsAndFailsJoins) {
  auto c = Make(Options(2));
  JoinSlot a;
  c->Join(Node("a", 0, 2, 4), a.callback());
  c->Shutdown();
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kUnavailable));
  JoinSlot late;
  c->Join(Node("b", 2, 2, 4), late.callback());
  EXPECT_THAT(*late.result, StatusIs(absl::StatusCode::kUnavailable));

  auto d = Make(Options(1));
  Assemble(*d, 1);
  FakeSubscriber s;
  ASSERT_THAT(d->Subscribe(0, &s), IsOk());
  d->Shutdown();
  ASSERT_TRUE(s.end.has_value());
  EXPECT_THAT(*s.end, StatusIs(absl::StatusCode::kUnavailable));
}

// The job's sparse value precision goes to every joiner and into the status; only fp32, fp16 and
// bf16 are accepted.
TEST(CoordinatorOptions, SparseValuesReachEveryJoinerAndTheStatus) {
  for (const std::string values : {"fp32", "fp16", "bf16"}) {
    SCOPED_TRACE(values);
    CoordinatorOptions o = Options(2);
    o.sparse_values = values;
    auto c = Make(o);
    ASSERT_NE(c, nullptr);
    JoinSlot a, b;
    c->Join(Node("a", 0, 1, 2), a.callback());
    c->Join(Node("b", 1, 1, 2), b.callback());
    for (JoinSlot* s : {&a, &b}) {
      ASSERT_TRUE(s->result.has_value());
      ASSERT_THAT(*s->result, IsOk());
      EXPECT_EQ((*s->result)->job.sparse_values, values);
    }
    EXPECT_EQ(c->Status().job.sparse_values, values);
  }
  for (const std::string bad : {"", "fp8", "FP16", "float16"}) {
    CoordinatorOptions o = Options(2);
    o.sparse_values = bad;
    EXPECT_THAT(Coordinator::Create(o),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("sparse_values: '" + bad + "' is not one of fp32, fp16, bf16")));
  }
  EXPECT_THAT(CheckSparseValues("bf16"), IsOk());
}

// The delay hook's parsing is tested in controller_settings_test.
TEST(CoordinatorOptions, DecisionDelayAndNodesAreChecked) {
  CoordinatorOptions o = Options(2);
  o.decision_delay = {{2, absl::Milliseconds(1)}};
  EXPECT_THAT(Coordinator::Create(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 2 does not exist")));
  o.decision_delay.clear();
  o.nodes = 0;
  EXPECT_THAT(Coordinator::Create(o), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::controller

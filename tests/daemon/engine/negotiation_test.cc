// The negotiation's message encoding, response cache, agreement and decision rules, run on
// hand-made messages (no transport).
#include "daemon/engine/negotiation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon::internal {
namespace {

using ::testing::HasSubstr;

TensorSpec Spec(std::string name, int64_t step) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = {4, 4};
  s.step = step;
  s.compress = true;
  return s;
}

JobDecision D(int64_t epoch, double theta) {
  JobDecision d;
  d.epoch = epoch;
  d.theta = theta;
  d.theta_candidate = theta * 2;
  d.phase = "searching";
  return d;
}

TEST(NegotiationTest, MessageRoundTrips) {
  NodeMessage m;
  m.decision = D(5, 40);
  m.failed = true;
  m.failure_code = absl::StatusCode::kUnavailable;
  m.failure_message = "rank 3: worker died";
  m.shutdown = true;
  ReadyEntry full;
  full.spec = Spec("w", 3);
  full.spec.samples = 64;
  full.spec.memory = MemoryType::kDevice;
  ReadyEntry cached;
  cached.cached = true;
  cached.cache_id = 9;
  cached.spec.step = 4;
  cached.error = "bad data";
  m.ready = {full, cached};
  const auto bytes = EncodeMessage(m);
  ASSERT_OK_AND_ASSIGN(NodeMessage got, DecodeMessage(bytes));
  EXPECT_EQ(got.decision.epoch, 5);
  EXPECT_EQ(got.decision.theta_candidate, 80);
  EXPECT_EQ(got.decision.phase, "searching");
  EXPECT_TRUE(got.failed && got.shutdown && !got.give_up);
  EXPECT_EQ(got.failure_code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.failure_message, "rank 3: worker died");
  ASSERT_EQ(got.ready.size(), 2u);
  EXPECT_EQ(got.ready[0].spec.name, "w");
  EXPECT_EQ(got.ready[0].spec.shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(got.ready[0].spec.samples, 64);
  EXPECT_EQ(got.ready[0].spec.memory, MemoryType::kDevice);
  EXPECT_EQ(got.ready[1].spec.memory, MemoryType::kHost);
  EXPECT_TRUE(got.ready[1].cached);
  EXPECT_EQ(got.ready[1].cache_id, 9u);
  EXPECT_EQ(got.ready[1].spec.step, 4);
  EXPECT_EQ(got.ready[1].error, "bad data");
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeMessage(absl::MakeConstSpan(bytes).first(cut)).ok()) << cut;
  }
}

TEST(NegotiationTest, FormatRanksMergesContiguousNodes) {
  const std::vector<NodeLayout> layout = {{0, 2}, {2, 2}, {4, 1}, {5, 3}};
  EXPECT_EQ(FormatRanks(layout, std::vector<int>{1}), "2-3");
  EXPECT_EQ(FormatRanks(layout, std::vector<int>{2}), "4");
  EXPECT_EQ(FormatRanks(layout, std::vector<int>{0, 1}), "0-3");
  EXPECT_EQ(FormatRanks(layout, std::vector<int>{3, 0}), "0-1,5-7");
  EXPECT_EQ(FormatNode(layout, 3), "node 3 (ranks 5-7)");
}

// Two negotiators (one per node) fed the same messages reach the same outcome; the second
// listing of a spec travels as a cache id; the step's decision is fixed by the first cycle.
TEST(NegotiationTest, ReplicasAgreeAndTheCacheAndStepDecisionsWork) {
  const std::vector<NodeLayout> layout = {{0, 1}, {1, 1}};
  Negotiator a(0, layout), b(1, layout);
  const absl::Time now = absl::Now();
  auto cycle = [&](std::vector<NodeMessage> m) {
    auto oa = a.Process(m, now);
    auto ob = b.Process(m, now);
    EXPECT_THAT(oa, IsOk());
    EXPECT_THAT(ob, IsOk());
    EXPECT_EQ(oa->ready.size(), ob->ready.size());
    return *oa;
  };
  std::vector<NodeMessage> m(2);
  m[0].decision = D(3, 10);
  m[1].decision = D(2, 40);
  m[0].ready = {a.MakeEntry(Spec("x", 0), "")};
  EXPECT_FALSE(m[0].ready[0].cached);
  CycleOutcome o = cycle(m);
  EXPECT_EQ(o.agreed.epoch, 2);  // the smallest epoch
  EXPECT_TRUE(o.ready.empty());
  EXPECT_TRUE(a.HasPending());

  m[0].ready.clear();
  m[0].decision = D(4, 10);
  m[1].decision = D(4, 10);
  m[1].ready = {b.MakeEntry(Spec("x", 0), "")};
  EXPECT_TRUE(m[1].ready[0].cached);  // node 0's listing put the spec in the cache
  o = cycle(m);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].decision.epoch, 4);

  // Another tensor of step 0 later still uses step 0's decision.
  m[0].decision = D(6, 1);
  m[1].decision = D(6, 1);
  m[0].ready = {a.MakeEntry(Spec("y", 0), "")};
  m[1].ready = {b.MakeEntry(Spec("y", 0), "")};
  o = cycle(m);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].decision.epoch, 4);
  // A new step takes the cycle's agreed decision.
  m[0].ready = {a.MakeEntry(Spec("y", 1), "")};
  m[1].ready = {b.MakeEntry(Spec("y", 1), "")};
  EXPECT_TRUE(m[0].ready[0].cached);
  o = cycle(m);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].decision.epoch, 6);
  EXPECT_FALSE(a.HasPending());
}

// Unnamed collectives get a new name per call: the cache keeps only the `capacity` most recently
// listed specs, every replica drops the same ones, and a dropped spec listed again travels in
// full and gets a new id.
TEST(NegotiationTest, TheResponseCacheKeepsTheMostRecentlyListedSpecs) {
  const std::vector<NodeLayout> layout = {{0, 1}, {1, 1}};
  constexpr size_t kCapacity = 4;
  Negotiator a(0, layout, kCapacity), b(1, layout, kCapacity);
  const absl::Time now = absl::Now();
  // One cycle: node 0 lists `first`, node 1 `second` (each from its own replica's cache).
  auto cycle = [&](std::vector<TensorSpec> first, std::vector<TensorSpec> second) {
    std::vector<NodeMessage> m(2);
    for (const TensorSpec& s : first) m[0].ready.push_back(a.MakeEntry(s, ""));
    for (const TensorSpec& s : second) m[1].ready.push_back(b.MakeEntry(s, ""));
    auto oa = a.Process(m, now);
    auto ob = b.Process(m, now);
    EXPECT_THAT(oa, IsOk());
    EXPECT_THAT(ob, IsOk());
    std::vector<std::string> names;
    for (size_t i = 0; i < oa->ready.size(); ++i) {
      EXPECT_EQ(oa->ready[i].spec.name, ob->ready[i].spec.name);
      EXPECT_EQ(oa->ready[i].spec.shape, ob->ready[i].spec.shape);
      names.push_back(oa->ready[i].spec.name);
    }
    EXPECT_EQ(a.cache_size(), b.cache_size());
    return names;
  };

  for (int i = 0; i < 50; ++i) {
    const TensorSpec unnamed = Spec(absl::StrCat("allreduce.noname.", i), i);
    const TensorSpec grad = Spec("grad.w", i);
    // The gradient is listed every step, so it stays cached; each unnamed name is new.
    EXPECT_EQ(a.MakeEntry(grad, "").cached, i > 0) << i;
    EXPECT_FALSE(a.MakeEntry(unnamed, "").cached) << i;
    EXPECT_THAT(cycle({grad, unnamed}, {grad, unnamed}),
                ::testing::ElementsAre("grad.w", unnamed.name));
    EXPECT_LE(a.cache_size(), kCapacity) << i;
  }
  EXPECT_EQ(a.cache_size(), kCapacity);
  EXPECT_TRUE(b.MakeEntry(Spec("allreduce.noname.49", 50), "").cached);
  EXPECT_TRUE(b.MakeEntry(Spec("allreduce.noname.47", 50), "").cached);
  EXPECT_FALSE(b.MakeEntry(Spec("allreduce.noname.46", 50), "").cached);  // dropped
  EXPECT_FALSE(b.MakeEntry(Spec("allreduce.noname.0", 50), "").cached);

  // A dropped spec comes back in full on both nodes and is cached again.
  EXPECT_THAT(cycle({Spec("allreduce.noname.0", 50)}, {Spec("allreduce.noname.0", 50)}),
              ::testing::ElementsAre("allreduce.noname.0"));
  EXPECT_TRUE(a.MakeEntry(Spec("allreduce.noname.0", 51), "").cached);

  // A tensor listed by node 0 in one cycle whose spec is dropped before node 1 lists it: node 1
  // sends it in full and the tensor still completes, with node 0's spec from the pending entry.
  EXPECT_TRUE(cycle({Spec("late", 60), Spec("n1", 60), Spec("n2", 60), Spec("n3", 60),
                     Spec("n4", 60)},
                    {Spec("n1", 60), Spec("n2", 60), Spec("n3", 60), Spec("n4", 60)})
                  .size() == 4);
  const ReadyEntry late = b.MakeEntry(Spec("late", 60), "");
  EXPECT_FALSE(late.cached);
  EXPECT_THAT(cycle({}, {Spec("late", 60)}), ::testing::ElementsAre("late"));
  EXPECT_FALSE(a.HasPending());
  EXPECT_LE(a.cache_size(), kCapacity);
}

TEST(NegotiationTest, ProtocolErrorsAreReported) {
  Negotiator a(0, {{0, 1}, {1, 1}});
  std::vector<NodeMessage> m(2);
  ReadyEntry bogus;
  bogus.cached = true;
  bogus.cache_id = 42;
  m[1].ready = {bogus};
  EXPECT_THAT(a.Process(m, absl::Now()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("node 1 (ranks 1)")));
}

TEST(NegotiationTest, AFailedNodeFailsTheJobWithItsMessage) {
  Negotiator a(0, {{0, 2}, {2, 2}});
  std::vector<NodeMessage> m(2);
  m[0].ready = {a.MakeEntry(Spec("x", 0), "")};
  ASSERT_THAT(a.Process(m, absl::Now()), IsOk());
  m[0].ready.clear();
  m[1].failed = true;
  m[1].failure_code = absl::StatusCode::kAborted;
  m[1].failure_message = "rank 2: worker exited";
  auto o = a.Process(m, absl::Now());
  ASSERT_THAT(o, IsOk());
  EXPECT_THAT(o->job_failure, StatusIs(absl::StatusCode::kAborted, "rank 2: worker exited"));
  EXPECT_FALSE(a.HasPending());
}

TEST(NegotiationTest, ANameMissingOnNodesThatMovedOnFailsAfterTheGrace) {
  Negotiator a(0, {{0, 1}, {1, 1}});
  const absl::Time t0 = absl::Now();
  std::vector<NodeMessage> m(2);
  m[0].ready = {a.MakeEntry(Spec("skipped", 3), "")};
  m[1].ready = {a.MakeEntry(Spec("next", 4), "")};
  ASSERT_THAT(a.Process(m, t0), IsOk());
  EXPECT_FALSE(a.MovedOn(t0 + absl::Milliseconds(500), absl::Seconds(1)));
  EXPECT_TRUE(a.MovedOn(t0 + absl::Seconds(1), absl::Seconds(1)));
  m[0].ready.clear();
  m[1].ready.clear();
  auto o = a.Process(m, t0 + absl::Seconds(1));  // nobody asked yet: nothing fails
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->failed.empty());
  m[0].give_up_moved_on = true;
  o = a.Process(m, t0 + absl::Seconds(1));
  ASSERT_THAT(o, IsOk());
  ASSERT_EQ(o->failed.size(), 1u);  // only 'skipped': node 0 has not moved past step 4
  EXPECT_EQ(o->failed[0].name, "skipped");
  EXPECT_THAT(o->failed[0].status.message(),
              HasSubstr("tensor 'skipped' (step 3): name missing on ranks 1 (they posted step 4 "
                        "already); posted on ranks 0"));
  EXPECT_TRUE(a.HasPending());
}

TEST(NegotiationTest, DeadlockAndStallReports) {
  Negotiator a(0, {{0, 1}, {1, 2}});
  const absl::Time t0 = absl::Now();
  std::vector<NodeMessage> m(2);
  m[0].ready = {a.MakeEntry(Spec("a", 0), "")};
  m[1].ready = {a.MakeEntry(Spec("b", 0), "")};
  ASSERT_THAT(a.Process(m, t0), IsOk());
  EXPECT_FALSE(a.Deadlocked(t0 + absl::Seconds(1), absl::Seconds(2)));
  EXPECT_TRUE(a.Deadlocked(t0 + absl::Seconds(3), absl::Seconds(2)));
  const auto lines = a.StallReports(t0 + absl::Seconds(3), absl::Seconds(2));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("tensor 'a' posted on ranks 0 has waited 3s for ranks 1-2"));
  EXPECT_TRUE(a.StallReports(t0 + absl::Seconds(4), absl::Seconds(2)).empty());  // once a period
  m[0].ready.clear();
  m[1].ready.clear();
  m[1].give_up = true;
  auto o = a.Process(m, t0 + absl::Seconds(3));
  ASSERT_THAT(o, IsOk());
  ASSERT_EQ(o->failed.size(), 2u);
  EXPECT_THAT(o->failed[0].status.message(),
              HasSubstr("tensor 'a' (step 0): name missing on ranks 1-2"));
  EXPECT_FALSE(a.HasPending());
}

// Process sets: a tensor of ranks {0, 4} (nodes 0 and 2 of three) is ready once those two nodes
// listed it, on every node's replica (node 1 runs nothing of it); its spec round-trips, repeats
// travel as cache ids, the missing-name and stall reports name only the set's nodes, and a node
// outside the set that lists the name anyway makes the set's disagreement the error.
TEST(NegotiationTest, AProcessSetNeedsOnlyTheNodesHoldingItsRanks) {
  const std::vector<NodeLayout> layout = {{0, 2}, {2, 2}, {4, 1}};
  Negotiator a(0, layout), b(1, layout), c(2, layout);
  const absl::Time t0 = absl::Now();
  auto cycle = [&](const std::vector<NodeMessage>& m, absl::Time now) {
    std::vector<NodeMessage> decoded;
    for (const NodeMessage& msg : m) {
      auto d = DecodeMessage(EncodeMessage(msg));
      EXPECT_THAT(d, IsOk());
      decoded.push_back(*d);
    }
    auto oa = a.Process(decoded, now);
    auto ob = b.Process(decoded, now);
    auto oc = c.Process(decoded, now);
    EXPECT_THAT(oa, IsOk());
    EXPECT_THAT(ob, IsOk());
    EXPECT_THAT(oc, IsOk());
    EXPECT_EQ(oa->ready.size(), ob->ready.size());
    EXPECT_EQ(oa->ready.size(), oc->ready.size());
    EXPECT_EQ(oa->failed.size(), oc->failed.size());
    return *oa;
  };
  TensorSpec ends = Spec("ends", 0);
  ends.compress = false;
  ends.process_set = {0, 4};
  EXPECT_EQ(ProcessSetNodes(ends, layout), (std::vector<int>{0, 2}));
  EXPECT_EQ(ProcessSetSize(ends, layout), 2);
  std::vector<NodeMessage> m(3);
  m[0].ready = {a.MakeEntry(ends, "")};
  CycleOutcome o = cycle(m, t0);
  EXPECT_TRUE(o.ready.empty());
  EXPECT_TRUE(a.MissingHere().empty());
  EXPECT_TRUE(b.MissingHere().empty());  // node 1 holds none of its ranks
  ASSERT_EQ(c.MissingHere().size(), 1u);
  EXPECT_EQ(c.MissingHere()[0].process_set, (std::vector<int>{0, 4}));
  const auto stalls = a.StallReports(t0 + absl::Seconds(3), absl::Seconds(2));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_THAT(stalls[0], HasSubstr("posted on ranks 0-1 has waited 3s for ranks 4"));
  // Node 1 waits for nothing of the set, so no deadlock while node 2 is merely late.
  EXPECT_FALSE(a.Deadlocked(t0 + absl::Seconds(10), absl::Seconds(2)));
  m[0].ready.clear();
  m[2].ready = {c.MakeEntry(ends, "")};
  o = cycle(m, t0);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].spec.process_set, (std::vector<int>{0, 4}));
  EXPECT_FALSE(a.HasPending() || b.HasPending() || c.HasPending());
  // The next step's listing goes by cache id and still carries the set.
  ends.step = 1;
  const ReadyEntry again = c.MakeEntry(ends, "");
  EXPECT_TRUE(again.cached);
  m[2].ready = {again};
  m[0].ready = {a.MakeEntry(ends, "")};
  o = cycle(m, t0);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].spec.process_set, (std::vector<int>{0, 4}));
  // Node 1 lists a name of the set with another set: the set's nodes and node 1 must all list
  // it, then it fails on every node naming the field.
  TensorSpec other = ends;
  other.name = "split";
  other.step = 2;
  TensorSpec wider = other;
  wider.process_set = {0, 2, 4};
  m[0].ready = {a.MakeEntry(other, "")};
  m[1].ready = {b.MakeEntry(wider, "")};
  m[2].ready.clear();
  o = cycle(m, t0);
  EXPECT_TRUE(o.ready.empty() && o.failed.empty());
  m[0].ready.clear();
  m[1].ready.clear();
  m[2].ready = {c.MakeEntry(other, "")};
  o = cycle(m, t0);
  ASSERT_EQ(o.failed.size(), 1u);
  EXPECT_EQ(o.failed[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(o.failed[0].status.message(),
              HasSubstr("tensor 'split': process_set [0,2,4] on ranks 2-3 differs from [0,4] on "
                        "ranks 0-1,4"));
}

// Join: what this node lacks is offered in listing order; the join completes when every node
// listed it, with the last joined rank of the node that listed it last (cycle, then node order).
TEST(NegotiationTest, JoinReportsMissingTensorsAndTheLastJoinedRank) {
  const std::vector<NodeLayout> layout = {{0, 2}, {2, 2}, {4, 1}};
  Negotiator a(0, layout), b(1, layout), c(2, layout);
  const absl::Time now = absl::Now();
  auto cycle = [&](const std::vector<NodeMessage>& m) {
    auto oa = a.Process(m, now);
    auto ob = b.Process(m, now);
    auto oc = c.Process(m, now);
    EXPECT_THAT(oa, IsOk());
    EXPECT_THAT(ob, IsOk());
    EXPECT_THAT(oc, IsOk());
    EXPECT_EQ(oa->ready.size(), oc->ready.size());
    return *oa;
  };
  auto join = [](int last_rank) {
    TensorSpec s;
    s.name = "gravac.join";
    s.kind = CollectiveKind::kJoin;
    s.dtype = collectives::DataType::kInt32;
    s.root_rank = last_rank;
    return s;
  };
  std::vector<NodeMessage> m(3);
  // Node 2 joins first (rank 4); nodes 0 and 1 post two tensors.
  m[2].ready = {c.MakeEntry(join(4), "")};
  m[0].ready = {a.MakeEntry(Spec("g1", 7), ""), a.MakeEntry(Spec("g2", 7), "")};
  m[1].ready = {b.MakeEntry(Spec("g1", 7), ""), b.MakeEntry(Spec("g2", 7), "")};
  CycleOutcome o = cycle(m);
  EXPECT_TRUE(o.ready.empty());
  const std::vector<TensorSpec> missing = c.MissingHere();
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].name, "g1");
  EXPECT_EQ(missing[1].name, "g2");
  EXPECT_EQ(missing[0].step, 7);
  EXPECT_EQ(missing[0].samples, 0);
  EXPECT_THAT(a.MissingHere(),
              ::testing::ElementsAre(::testing::Field(&TensorSpec::name, "gravac.join")));
  // Node 2 answers both with zeros; they run. Then nodes 1 and 0 join in one cycle, in node
  // order: node 1 (last joined rank 3) lists after node 0 (rank 0), so rank 3 is the last.
  m[0].ready.clear();
  m[1].ready.clear();
  m[2].ready = {c.MakeEntry(missing[0], ""), c.MakeEntry(missing[1], "")};
  o = cycle(m);
  ASSERT_EQ(o.ready.size(), 2u);
  EXPECT_TRUE(c.MissingHere().empty());
  m[2].ready.clear();
  m[0].ready = {a.MakeEntry(join(0), "")};
  m[1].ready = {b.MakeEntry(join(3), "")};
  o = cycle(m);
  ASSERT_EQ(o.ready.size(), 1u);
  EXPECT_EQ(o.ready[0].spec.kind, CollectiveKind::kJoin);
  EXPECT_EQ(o.ready[0].spec.root_rank, 3);
  EXPECT_EQ(o.ready[0].listed_ns.size(), 3u);  // one listing time per node (the timeline)
  EXPECT_FALSE(a.HasPending());
}

}  // namespace
}  // namespace gravac::daemon::internal

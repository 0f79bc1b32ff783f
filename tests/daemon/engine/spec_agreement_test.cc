// The agreement rule has one owner (daemon/engine/spec_agreement.h): the same mismatch gets the
// same message from the local check (two workers of one node) and from the cross-node
// negotiation (two nodes of one worker each), and both let the same differences through.
#include "daemon/engine/spec_agreement.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "daemon/engine/negotiation.h"
#include "daemon/local/local_reduce.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

// What the local side says about ranks 0 and 1 posting `a` and `b`; "" when it accepts them.
std::string LocalMessage(const TensorSpec& a, const TensorSpec& b) {
  std::vector<LocalInput> in = {{0, &a, nullptr, 0}, {1, &b, nullptr, 0}};
  absl::Status s = CheckLocalAgreement(in);
  if (s.ok()) return "";
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  return std::string(s.message());
}

// What the negotiation says about node 0 (rank 0) listing `a` and node 1 (rank 1) listing `b`.
std::string CrossNodeMessage(const TensorSpec& a, const TensorSpec& b) {
  const std::vector<NodeLayout> layout = {{0, 1}, {1, 1}};
  internal::Negotiator n(0, layout);
  std::vector<internal::NodeMessage> m(2);
  m[0].ready = {n.MakeEntry(a, "")};
  m[1].ready = {n.MakeEntry(b, "")};
  absl::StatusOr<internal::CycleOutcome> o = n.Process(m, absl::Now());
  EXPECT_THAT(o, IsOk());
  if (!o.ok() || o->failed.empty()) return "";
  EXPECT_THAT(o->failed[0].status, StatusIs(absl::StatusCode::kFailedPrecondition));
  return std::string(o->failed[0].status.message());
}

TensorSpec Base(CollectiveKind kind) {
  TensorSpec s;
  s.name = "w";
  s.kind = kind;
  s.shape = {4, 3};
  s.step = 2;
  return s;
}

struct Case {
  const char* what;
  CollectiveKind kind;
  void (*change)(TensorSpec&);
  const char* message;  // "" = the difference is allowed
};

const Case kCases[] = {
    {"kind", CollectiveKind::kAllreduce, [](TensorSpec& s) { s.kind = CollectiveKind::kBroadcast; },
     "tensor 'w': kind broadcast on ranks 1 differs from allreduce on ranks 0"},
    {"process_set", CollectiveKind::kAllreduce,
     [](TensorSpec& s) {
       s.process_set = {0, 1, 2};
     },
     "tensor 'w': process_set [0-2] on ranks 1 differs from all on ranks 0"},
    {"dtype", CollectiveKind::kAllreduce,
     [](TensorSpec& s) { s.dtype = collectives::DataType::kFloat16; },
     "tensor 'w': dtype fp16 on ranks 1 differs from fp32 on ranks 0"},
    {"memory", CollectiveKind::kAllreduce, [](TensorSpec& s) { s.memory = MemoryType::kDevice; },
     "tensor 'w': memory device on ranks 1 differs from host on ranks 0"},
    {"memory of a broadcast", CollectiveKind::kBroadcast,
     [](TensorSpec& s) { s.memory = MemoryType::kDevice; },
     "tensor 'w': memory device on ranks 1 differs from host on ranks 0"},
    {"shape", CollectiveKind::kAllreduce,
     [](TensorSpec& s) {
       s.shape = {4, 4};
     },
     "tensor 'w': shape [4,4] on ranks 1 differs from [4,3] on ranks 0"},
    {"allgather shape[1..]", CollectiveKind::kAllgather,
     [](TensorSpec& s) {
       s.shape = {4, 4};
     },
     "tensor 'w': shape [*,4] on ranks 1 differs from [*,3] on ranks 0"},
    {"allgather first dimension", CollectiveKind::kAllgather,
     [](TensorSpec& s) {
       s.shape = {9, 3};
     },
     ""},
    {"op", CollectiveKind::kAllreduce,
     [](TensorSpec& s) { s.reduce_op = collectives::ReduceOp::kAverage; },
     "tensor 'w': op average on ranks 1 differs from sum on ranks 0"},
    {"op of a broadcast", CollectiveKind::kBroadcast,
     [](TensorSpec& s) { s.reduce_op = collectives::ReduceOp::kAverage; }, ""},
    {"root_rank", CollectiveKind::kBroadcast, [](TensorSpec& s) { s.root_rank = 1; },
     "tensor 'w': root_rank 1 on ranks 1 differs from 0 on ranks 0"},
    {"root_rank of an allreduce", CollectiveKind::kAllreduce,
     [](TensorSpec& s) { s.root_rank = 1; }, ""},
    {"compress", CollectiveKind::kAllreduce, [](TensorSpec& s) { s.compress = true; },
     "tensor 'w': compress true on ranks 1 differs from false on ranks 0"},
    {"compress of an allgather", CollectiveKind::kAllgather,
     [](TensorSpec& s) { s.compress = true; }, ""},
    {"compress of a broadcast", CollectiveKind::kBroadcast,
     [](TensorSpec& s) { s.compress = true; }, ""},
    {"step", CollectiveKind::kAllgather, [](TensorSpec& s) { s.step = 3; },
     "tensor 'w': step 3 on ranks 1 differs from 2 on ranks 0"},
    {"samples", CollectiveKind::kAllreduce, [](TensorSpec& s) { s.samples = 7; }, ""},
};

TEST(SpecAgreementTest, LocalAndCrossNodeChecksGiveTheSameMessage) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    const TensorSpec a = Base(c.kind);
    TensorSpec b = a;
    c.change(b);
    EXPECT_EQ(LocalMessage(a, b), c.message);
    EXPECT_EQ(CrossNodeMessage(a, b), c.message);
  }
}

TEST(SpecAgreementTest, TheFirstDifferingFieldIsNamedWithEveryRankHoldingEachValue) {
  TensorSpec a = Base(CollectiveKind::kAllreduce), b = a, c = a;
  b.dtype = c.dtype = collectives::DataType::kInt32;
  b.compress = true;  // checked after dtype
  const TensorSpec* specs[] = {&a, &b, &c, &a};
  EXPECT_EQ(FindDisagreement("w", specs,
                             [](int i) {
                               return std::vector<int>{2 * i, 2 * i + 1};
                             }),
            "tensor 'w': dtype int32 on ranks 2-5 differs from fp32 on ranks 0-1,6-7");
  const TensorSpec* same[] = {&a, &a};
  EXPECT_EQ(FindDisagreement("w", same, [](int i) { return std::vector<int>{i}; }), "");
}

TEST(SpecAgreementTest, FormatRankListMergesRanges) {
  EXPECT_EQ(FormatRankList({5, 0, 1, 2}), "0-2,5");
  EXPECT_EQ(FormatRankList({3}), "3");
  EXPECT_EQ(FormatRankList({}), "");
}

}  // namespace
}  // namespace gravac::daemon

// The engine over P in-process nodes: dense collectives, fusion, and invariant 3 (mismatches,
// failures and stalls give errors naming ranks, tensor and field, never a hang).
#include "daemon/engine/engine.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/engine/engine_harness.h"

namespace gravac::daemon {
namespace {

using collectives::DataType;
using collectives::ReduceOp;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::gravac::daemon::testing;  // NOLINT

EngineOptions Base() {
  EngineOptions o;
  o.job.compressor = "none";
  o.cycle_time = absl::Milliseconds(1);
  return o;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/engine_", name, "_", getpid(), "_");
}

// Value of element i on node n: small integers, so every sum and type is exact.
int64_t Value(int n, int i, bool non_negative) {
  const int64_t v = (n + 1) * (i % 7) - (non_negative ? 0 : 3 * n);
  return v;
}

template <typename T>
std::vector<uint8_t> Fill(int n, int count, bool non_negative, T (*convert)(int64_t)) {
  std::vector<T> v(count);
  for (int i = 0; i < count; ++i) v[i] = convert(Value(n, i, non_negative));
  return Bytes(v);
}

struct TypeCase {
  DataType type;
  std::function<std::vector<uint8_t>(int n, int count)> fill;
  // Expected value of element i from the exact integer sum and the world size.
  std::function<double(int64_t sum, int world, ReduceOp op)> expect;
  std::function<double(const std::vector<uint8_t>&, int i)> read;
};

std::vector<TypeCase> Types() {
  using collectives::BFloat16ToFloat;
  using collectives::FloatToBFloat16;
  using collectives::FloatToHalf;
  using collectives::HalfToFloat;
  std::vector<TypeCase> t;
  t.push_back(
      {DataType::kFloat32,
       [](int n, int c) { return Fill<float>(n, c, false, [](int64_t v) { return float(v); }); },
       [](int64_t s, int w, ReduceOp op) {
         return op == ReduceOp::kSum ? double(float(s)) : double(float(s) / float(w));
       },
       [](const std::vector<uint8_t>& b, int i) { return double(Values<float>(b)[i]); }});
  t.push_back(
      {DataType::kFloat64,
       [](int n, int c) { return Fill<double>(n, c, false, [](int64_t v) { return double(v); }); },
       [](int64_t s, int w, ReduceOp op) {
         return op == ReduceOp::kSum ? double(s) : double(s) / w;
       },
       [](const std::vector<uint8_t>& b, int i) { return Values<double>(b)[i]; }});
  t.push_back(
      {DataType::kFloat16,
       [](int n, int c) {
         return Fill<uint16_t>(n, c, false, [](int64_t v) { return FloatToHalf(float(v)); });
       },
       [](int64_t s, int w, ReduceOp op) {
         return double(
             HalfToFloat(FloatToHalf(op == ReduceOp::kSum ? float(s) : float(s) / float(w))));
       },
       [](const std::vector<uint8_t>& b, int i) {
         return double(HalfToFloat(Values<uint16_t>(b)[i]));
       }});
  t.push_back({DataType::kBFloat16,
               [](int n, int c) {
                 return Fill<uint16_t>(n, c, false,
                                       [](int64_t v) { return FloatToBFloat16(float(v)); });
               },
               [](int64_t s, int w, ReduceOp op) {
                 return double(BFloat16ToFloat(
                     FloatToBFloat16(op == ReduceOp::kSum ? float(s) : float(s) / float(w))));
               },
               [](const std::vector<uint8_t>& b, int i) {
                 return double(BFloat16ToFloat(Values<uint16_t>(b)[i]));
               }});
  t.push_back(
      {DataType::kInt32,
       [](int n, int c) {
         return Fill<int32_t>(n, c, false, [](int64_t v) { return int32_t(v); });
       },
       [](int64_t s, int w, ReduceOp op) { return double(op == ReduceOp::kSum ? s : s / w); },
       [](const std::vector<uint8_t>& b, int i) { return double(Values<int32_t>(b)[i]); }});
  t.push_back(
      {DataType::kInt64,
       [](int n, int c) { return Fill<int64_t>(n, c, false, [](int64_t v) { return v; }); },
       [](int64_t s, int w, ReduceOp op) { return double(op == ReduceOp::kSum ? s : s / w); },
       [](const std::vector<uint8_t>& b, int i) { return double(Values<int64_t>(b)[i]); }});
  t.push_back(
      {DataType::kUInt8,
       [](int n, int c) { return Fill<uint8_t>(n, c, true, [](int64_t v) { return uint8_t(v); }); },
       [](int64_t s, int w, ReduceOp op) { return double(op == ReduceOp::kSum ? s : s / w); },
       [](const std::vector<uint8_t>& b, int i) { return double(Values<uint8_t>(b)[i]); }});
  return t;
}

TEST(EngineTest, DenseAllreduceIsExactForEveryTypeAndOp) {
  Cluster c({2, 1, 2}, Base());  // world of 5 ranks on 3 nodes
  const int count = 37;
  int64_t step = 0;
  for (const TypeCase& tc : Types()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      SCOPED_TRACE(
          gravac::StrCat(collectives::DataTypeName(tc.type), " ", collectives::ReduceOpName(op)));
      const bool non_negative = tc.type == DataType::kUInt8;
      auto results = RunOnAll(c, [&](int n) {
        NodeTensor t;
        t.spec.name = gravac::StrCat("t_", collectives::DataTypeName(tc.type));
        t.spec.dtype = tc.type;
        t.spec.reduce_op = op;
        t.spec.shape = {count};
        t.spec.step = step;
        t.data = tc.fill(n, count);
        return t;
      });
      ++step;
      for (int n = 0; n < c.nodes(); ++n) {
        ASSERT_THAT(results[n].status, IsOk());
        EXPECT_EQ(results[n].collective, "dense_allreduce");
        EXPECT_EQ(results[n].theta, 1.0);
        ASSERT_EQ(results[n].data.size(), count * collectives::DataTypeSize(tc.type));
        for (int i = 0; i < count; ++i) {
          int64_t sum = 0;
          for (int m = 0; m < c.nodes(); ++m) sum += Value(m, i, non_negative);
          ASSERT_EQ(tc.read(results[n].data, i), tc.expect(sum, c.world, op)) << "element " << i;
        }
      }
    }
  }
}

TEST(EngineTest, SingleNodeJob) {
  EngineOptions o = Base();
  o.job.compressor = "topk";
  Cluster c({2}, o);
  auto r = RunOnAll(c, [](int) {
    return Allreduce("w", {2.0f, 4.0f, 6.0f}, true, 0, ReduceOp::kAverage);
  });
  ASSERT_THAT(r[0].status, IsOk());
  EXPECT_EQ(r[0].collective, "dense_allreduce");  // one node: nothing to save
  EXPECT_EQ(Values<float>(r[0].data), (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

TEST(EngineTest, AllgatherWithDifferentFirstDimensions) {
  Cluster c({2, 1, 3}, Base());
  const std::vector<std::vector<int64_t>> dims = {{1, 3}, {0}, {2, 1, 2}};
  auto results = RunOnAll(c, [&](int n) {
    NodeTensor t;
    t.spec.name = "gather";
    t.spec.kind = CollectiveKind::kAllgather;
    t.spec.shape = {dims[n][0], 2};
    t.first_dims = dims[n];
    int64_t rows = 0;
    for (int64_t d : dims[n]) rows += d;
    std::vector<float> v;
    for (int64_t r = 0; r < rows * 2; ++r) v.push_back(100.0f * n + r);
    t.data = Bytes(v);
    return t;
  });
  std::vector<float> want;
  for (int n = 0; n < 3; ++n) {
    int64_t rows = 0;
    for (int64_t d : dims[n]) rows += d;
    for (int64_t r = 0; r < rows * 2; ++r) want.push_back(100.0f * n + r);
  }
  for (const TensorResult& r : results) {
    ASSERT_THAT(r.status, IsOk());
    EXPECT_EQ(r.collective, "allgather");
    EXPECT_EQ(r.first_dims, (std::vector<int64_t>{1, 3, 0, 2, 1, 2}));
    EXPECT_EQ(Values<float>(r.data), want);
  }
}

TEST(EngineTest, BroadcastFromEachNode) {
  Cluster c({2, 1, 2}, Base());
  for (int root : {0, 1, 2, 4}) {
    const int root_node = root < 2 ? 0 : (root < 3 ? 1 : 2);
    auto results = RunOnAll(c, [&](int n) {
      NodeTensor t;
      t.spec.name = absl::StrCat("bcast", root);
      t.spec.kind = CollectiveKind::kBroadcast;
      t.spec.dtype = DataType::kInt64;
      t.spec.root_rank = root;
      t.spec.shape = {3};
      t.data = Bytes(std::vector<int64_t>{n * 10 + 1, n * 10 + 2, int64_t{1} << 50});
      return t;
    });
    for (const TensorResult& r : results) {
      ASSERT_THAT(r.status, IsOk());
      EXPECT_EQ(r.collective, "broadcast");
      EXPECT_EQ(Values<int64_t>(r.data),
                (std::vector<int64_t>{root_node * 10 + 1, root_node * 10 + 2, int64_t{1} << 50}));
    }
  }
}

// 40 small tensors posted at once: fused into few groups, results identical to unfused runs.
TEST(EngineTest, FusionGivesTheSameResultsAsSingleTensors) {
  auto run = [](size_t threshold, const std::string& log) {
    EngineOptions o = Base();
    o.fusion_threshold_bytes = threshold;
    o.step_log_path = log;
    o.cycle_time = absl::Milliseconds(20);  // every node's 40 tensors land in one cycle
    Cluster c({1, 2}, o);
    auto pending = PendingGrid(2, 40);
    for (int n = 0; n < 2; ++n) {
      for (int k = 0; k < 40; ++k) {
        std::vector<float> v(3 + k % 5);
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * (n + 1) * (k + 1) + 0.01f * i;
        c.engines[n]->Enqueue(Allreduce(absl::StrCat("w", k), v, false, 0, ReduceOp::kAverage),
                              pending[n][k].callback());
      }
    }
    std::vector<std::vector<float>> out;
    for (int n = 0; n < 2; ++n) {
      for (int k = 0; k < 40; ++k) {
        TensorResult r = pending[n][k].Get();
        EXPECT_THAT(r.status, IsOk());
        out.push_back(Values<float>(r.data));
      }
    }
    return out;
  };
  const std::string fused_log = TempPath("fused"), single_log = TempPath("single");
  const auto fused = run(64 << 20, fused_log);
  const auto single = run(0, single_log);
  EXPECT_EQ(fused, single);
  const auto fused_lines = ReadLines(fused_log + "0");
  const auto single_lines = ReadLines(single_log + "0");
  EXPECT_EQ(single_lines.size(), 40u);
  EXPECT_LT(fused_lines.size(), 10u);
  EXPECT_EQ(ReadLines(fused_log + "1"), fused_lines);
  EXPECT_THAT(fused_lines.front(), HasSubstr("collective=dense_allreduce tensors=w"));
  for (const std::string& base : {fused_log, single_log}) {
    for (const char* node : {"0", "1"}) std::remove((base + node).c_str());
  }
}

// Invariant 3: metadata that differs across nodes fails the tensor on every node, naming the
// ranks, the tensor and the field, within 10 s; later tensors still work.
TEST(EngineTest, MismatchedMetadataFailsEveryNodeNamingRanksAndField) {
  Cluster c({2, 2, 2}, Base());
  struct Case {
    std::string name;
    std::function<void(NodeTensor&)> change;  // applied on node 2
    std::string want;
  };
  const std::vector<Case> cases = {
      {"w1",
       [](NodeTensor& t) {
         t.spec.shape = {4, 3};
         t.data.resize(48);
       },
       "tensor 'w1': shape [4,3] on ranks 4-5 differs from [4,4] on ranks 0-3"},
      {"w2", [](NodeTensor& t) { t.spec.dtype = DataType::kInt32; },
       "tensor 'w2': dtype int32 on ranks 4-5 differs from fp32 on ranks 0-3"},
      {"w3", [](NodeTensor& t) { t.spec.reduce_op = ReduceOp::kAverage; },
       "tensor 'w3': op average on ranks 4-5 differs from sum on ranks 0-3"},
      {"w4", [](NodeTensor& t) { t.spec.compress = true; },
       "tensor 'w4': compress true on ranks 4-5 differs from false on ranks 0-3"},
  };
  for (const Case& k : cases) {
    const absl::Time start = absl::Now();
    auto results = RunOnAll(c, [&](int n) {
      NodeTensor t = Allreduce(k.name, std::vector<float>(16, 1.0f), false, 3);
      t.spec.shape = {4, 4};
      if (n == 2) k.change(t);
      return t;
    });
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
    for (const TensorResult& r : results) {
      EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(k.want)));
    }
  }
  auto ok = RunOnAll(c, [](int n) { return Allreduce("after", {1.0f, 2.0f}, false, 4); });
  for (const TensorResult& r : ok) {
    ASSERT_THAT(r.status, IsOk());
    EXPECT_EQ(Values<float>(r.data), (std::vector<float>{3.0f, 6.0f}));
  }
}

// Local workers that disagree are found by the local side; the engine must still fail the tensor
// on the other nodes (whose ranks wait for it), as a mismatch, with the local side's message.
TEST(EngineTest, LocalDisagreementFailsEveryNodeAsAMismatch) {
  Cluster c({2, 2}, Base());
  const absl::Time start = absl::Now();
  auto results = RunOnAll(c, [](int n) {
    NodeTensor t = Allreduce("w", {1.0f, 2.0f}, false, 0);
    if (n == 0) {
      t.local_status = absl::FailedPreconditionError(
          "tensor 'w': shape differs between local ranks: rank 0 has [2], rank 1 has [3]");
    }
    return t;
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const TensorResult& r : results) {
    EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("rank 0 has [2], rank 1 has [3]")));
  }
  auto ok = RunOnAll(c, [](int n) { return Allreduce("after", {1.0f}, false, 1); });
  for (const TensorResult& r : ok) EXPECT_THAT(r.status, IsOk());
}

TEST(EngineTest, DifferentNamesFailEveryNodeInsteadOfHanging) {
  ManualClock clock;
  EngineOptions o = Base();
  o.clock = &clock;
  o.mismatch_timeout = absl::Seconds(1);
  o.moved_on_grace = absl::ZeroDuration();  // only the deadlock rule
  Cluster c({2, 2}, o);
  std::vector<Pending> pending(2);
  for (int n = 0; n < 2; ++n) {
    c.engines[n]->Enqueue(Allreduce(n == 0 ? "grad_a" : "grad_b", {1.0f}, false, 7),
                          pending[n].callback());
  }
  // Both nodes wait for mismatch_timeout of the clock, then give up together.
  clock.Advance(absl::Milliseconds(900));
  EXPECT_FALSE(pending[0].Ready(absl::Milliseconds(20)));
  const absl::Duration moved = AdvanceUntil(clock, absl::Milliseconds(50), [&] {
    return pending[0].Ready() && pending[1].Ready();
  });
  EXPECT_GE(absl::Milliseconds(900) + moved, absl::Seconds(1));
  const std::vector<TensorResult> results = {pending[0].Get(), pending[1].Get()};
  EXPECT_THAT(results[0].status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("tensor 'grad_a' (step 7): name missing on ranks 2-3")));
  EXPECT_THAT(results[1].status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("tensor 'grad_b' (step 7): name missing on ranks 0-1")));
}

TEST(EngineTest, NameMissingIsDetectedWhenTheOtherNodeMovedOn) {
  ManualClock clock;
  EngineOptions o = Base();
  o.clock = &clock;
  o.mismatch_timeout = absl::ZeroDuration();  // only the step rule
  o.moved_on_grace = absl::Milliseconds(200);
  Cluster c({1, 1}, o);
  Pending only_on_0, step1_on_0, step1_on_1;
  c.engines[0]->Enqueue(Allreduce("skipped", {1.0f}, false, 0), only_on_0.callback());
  c.engines[1]->Enqueue(Allreduce("next", {1.0f}, false, 1), step1_on_1.callback());
  EXPECT_FALSE(only_on_0.Ready(absl::Milliseconds(20)));  // the grace is clock time
  EXPECT_GE(AdvanceUntil(clock, absl::Milliseconds(20), [&] { return only_on_0.Ready(); }),
            absl::Milliseconds(200));
  EXPECT_THAT(only_on_0.Get().status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("tensor 'skipped' (step 0): name missing on ranks 1")));
  c.engines[0]->Enqueue(Allreduce("next", {2.0f}, false, 1), step1_on_0.callback());
  EXPECT_EQ(Values<float>(step1_on_0.Get().data), std::vector<float>{3.0f});
  EXPECT_EQ(Values<float>(step1_on_1.Get().data), std::vector<float>{3.0f});
}

TEST(EngineTest, FailLocalFailsTheOtherNodesAndLaterTensors) {
  Cluster c({2, 2, 1}, Base());
  Pending waiting0, waiting2;
  c.engines[0]->Enqueue(Allreduce("w", {1.0f}, false, 0), waiting0.callback());
  c.engines[2]->Enqueue(Allreduce("w", {1.0f}, false, 0), waiting2.callback());
  c.engines[1]->FailLocal(absl::UnavailableError("rank 3: worker disconnected mid-step"));
  for (Pending* p : {&waiting0, &waiting2}) {
    EXPECT_THAT(p->Get().status, StatusIs(absl::StatusCode::kUnavailable,
                                          HasSubstr("rank 3: worker disconnected mid-step")));
  }
  Pending later;
  c.engines[0]->Enqueue(Allreduce("v", {1.0f}, false, 1), later.callback());
  EXPECT_THAT(later.Get().status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 3")));
}

TEST(EngineTest, AStoppedNodeFailsTheOthers) {
  Cluster c({2, 2, 2}, Base());
  Pending p0, p1;
  c.engines[0]->Enqueue(Allreduce("w", {1.0f}, false, 0), p0.callback());
  c.engines[1]->Enqueue(Allreduce("w", {1.0f}, false, 0), p1.callback());
  const absl::Time start = absl::Now();
  c.fabric.CloseRank(2);  // node 2's daemon dies: its connections reset
  TensorResult r0 = p0.Get(), r1 = p1.Get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(r0.status.ok());
  EXPECT_FALSE(r1.status.ok());
  const std::string all = absl::StrCat(r0.status.message(), "\n", r1.status.message());
  EXPECT_THAT(all, HasSubstr("ranks 4-5"));
  EXPECT_THAT(std::string(r0.status.message()), HasSubstr("node 0 (ranks 0-1)"));
}

TEST(EngineTest, StallWarningNamesTheMissingRanks) {
  const std::string path = TempPath("stall") + "log";
  std::FILE* sink = std::fopen(path.c_str(), "w");
  ASSERT_NE(sink, nullptr);
  Logger log("gravacd[node 0]", LogLevel::kInfo, sink);
  auto logged = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  ManualClock clock;
  EngineOptions o = Base();
  o.clock = &clock;
  o.stall_warning = absl::Milliseconds(200);
  o.log = &log;
  Cluster c({2, 3}, o);
  Pending p0, p1;
  c.engines[0]->Enqueue(Allreduce("slow", {1.0f}, false, 0), p0.callback());
  EXPECT_FALSE(p0.Ready(absl::Milliseconds(20)));
  EXPECT_THAT(logged(), Not(HasSubstr("stall")));  // no clock time passed
  const absl::Duration moved = AdvanceUntil(clock, absl::Milliseconds(20), [&] {
    return logged().find("stall: tensor 'slow'") != std::string::npos;
  });
  EXPECT_GE(moved, absl::Milliseconds(200));
  c.engines[1]->Enqueue(Allreduce("slow", {2.0f}, false, 0), p1.callback());
  EXPECT_EQ(Values<float>(p0.Get().data), std::vector<float>{3.0f});
  EXPECT_EQ(Values<float>(p1.Get().data), std::vector<float>{3.0f});
  c.ShutdownAll();
  std::fclose(sink);
  const std::string text = logged();
  std::remove(path.c_str());
  EXPECT_THAT(text, HasSubstr("stall: tensor 'slow' posted on ranks 0-1 has waited"));
  EXPECT_THAT(text, HasSubstr("for ranks 2-4"));
}

TEST(EngineTest, ShutdownIsAgreedAndRefusesLaterTensors) {
  Cluster c({1, 1}, Base());
  auto r = RunOnAll(c, [](int n) { return Allreduce("x", {1.0f}, false, 0); });
  ASSERT_THAT(r[0].status, IsOk());
  Engine* e0 = c.engines[0].get();
  Engine* e1 = c.engines[1].get();
  auto f0 = std::async(std::launch::async, [e0] { return e0->Shutdown(absl::Seconds(5)); });
  auto f1 = std::async(std::launch::async, [e1] { return e1->Shutdown(absl::Seconds(5)); });
  EXPECT_THAT(f0.get(), IsOk());
  EXPECT_THAT(f1.get(), IsOk());
  Pending late;
  e0->Enqueue(Allreduce("y", {1.0f}, false, 1), late.callback());
  EXPECT_THAT(late.Get().status, StatusIs(absl::StatusCode::kCancelled));
}

TEST(EngineTest, ShutdownOfOneNodeAloneIsBounded) {
  Cluster c({1, 1}, Base());
  const absl::Time start = absl::Now();
  EXPECT_THAT(c.engines[0]->Shutdown(absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("shutdown not agreed")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  // The other node learns it through its communicator.
  Pending p;
  c.engines[1]->Enqueue(Allreduce("x", {1.0f}, false, 0), p.callback());
  EXPECT_FALSE(p.Get().status.ok());
}

}  // namespace
}  // namespace gravac::daemon

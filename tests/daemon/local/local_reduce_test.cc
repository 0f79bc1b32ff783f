#include "daemon/local/local_reduce.h"

#include <cstring>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Request MakeRequest(v1::CollectiveKind kind, v1::DataType dtype, std::vector<int64_t> shape,
                        uint64_t bytes) {
  v1::Request r;
  r.set_name("t");
  r.set_kind(kind);
  r.set_dtype(dtype);
  for (int64_t d : shape) r.add_shape(d);
  r.set_bytes(bytes);
  return r;
}

// A shape whose byte count wraps around 2^64 matched a small posted size ([2^62, 4] float32 "is"
// 0 bytes) and was accepted; the ipc_frames_fuzz invariant (tests/fuzz/) states the rule.
TEST(LocalReduceTest, SpecFromRequestRefusesAShapeWhoseByteCountOverflows) {
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::ALLREDUCE, v1::FLOAT32, {int64_t{1} << 62, 4}, 0), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 2^63 bytes")));
  EXPECT_THAT(
      SpecFromRequest(MakeRequest(v1::ALLREDUCE, v1::UINT8, {int64_t{1} << 32, int64_t{1} << 32}, 0),
                      1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 2^63 bytes")));
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::ALLREDUCE, v1::FLOAT32, {0, int64_t{1} << 62}, 0), 1),
              IsOk());
}

// Issue 18: the memory type of the caller's tensor travels in the request, and a value the
// daemon does not know is refused naming the rank, tensor and field.
TEST(LocalReduceTest, SpecFromRequestReadsTheMemoryType) {
  v1::Request r = MakeRequest(v1::ALLREDUCE, v1::FLOAT32, {2}, 8);
  ASSERT_OK_AND_ASSIGN(TensorSpec host, SpecFromRequest(r, 0));
  EXPECT_EQ(host.memory, MemoryType::kHost);
  r.set_memory(v1::DEVICE_MEMORY);
  ASSERT_OK_AND_ASSIGN(TensorSpec device, SpecFromRequest(r, 0));
  EXPECT_EQ(device.memory, MemoryType::kDevice);
  r.set_memory(static_cast<v1::MemoryKind>(7));
  EXPECT_THAT(SpecFromRequest(r, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 2, tensor 't': field memory: unknown memory type 7")));
}

TEST(LocalReduceTest, SpecFromRequestChecksBytesAgainstShape) {
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::ALLREDUCE, v1::FLOAT64, {2, 3}, 48), 0), IsOk());
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::ALLREDUCE, v1::FLOAT64, {2, 3}, 24), 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 3, tensor 't': 24 bytes posted for shape [2, 3]")));
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::ALLGATHER, v1::FLOAT32, {}, 4), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one dimension")));
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::COLLECTIVE_UNSPECIFIED, v1::FLOAT32, {}, 4), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kind")));
}

TEST(LocalReduceTest, JoinIsAnInt32Scalar) {
  ASSERT_OK_AND_ASSIGN(TensorSpec join,
                       SpecFromRequest(MakeRequest(v1::JOIN, v1::INT32, {}, 4), 2));
  EXPECT_EQ(join.kind, CollectiveKind::kJoin);
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::JOIN, v1::FLOAT32, {}, 4), 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 2, tensor 't': join must be an int32 scalar")));
  EXPECT_THAT(SpecFromRequest(MakeRequest(v1::JOIN, v1::INT32, {2}, 8), 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("int32 scalar")));
}

// Horovod's process sets: the rank must be in its set, the set's ranks distinct, ascending and
// within the job, a broadcast's root in it, no compression or join on a subset; a set of every
// rank is the whole job's.
TEST(LocalReduceTest, ProcessSetsAreChecked) {
  auto spec_of = [](v1::CollectiveKind kind, std::vector<int> set, bool compress = false) {
    v1::Request r = MakeRequest(kind, kind == v1::JOIN ? v1::INT32 : v1::FLOAT32, {}, 4);
    for (int rank : set) r.add_process_set(rank);
    r.set_compress(compress);
    r.set_root_rank(3);
    auto spec = SpecFromRequest(r, 1);
    EXPECT_THAT(spec, IsOk());
    return *spec;
  };
  auto check = [](TensorSpec spec, int rank) { return CheckProcessSet(&spec, rank, 4); };
  TensorSpec ok = spec_of(v1::ALLREDUCE, {1, 3});
  EXPECT_THAT(CheckProcessSet(&ok, 1, 4), IsOk());
  EXPECT_EQ(ok.process_set, (std::vector<int>{1, 3}));
  EXPECT_TRUE(InProcessSet(ok, 3));
  EXPECT_FALSE(InProcessSet(ok, 2));
  TensorSpec all = spec_of(v1::ALLREDUCE, {0, 1, 2, 3}, /*compress=*/true);
  EXPECT_THAT(CheckProcessSet(&all, 1, 4), IsOk());
  EXPECT_TRUE(all.process_set.empty());
  EXPECT_THAT(check(spec_of(v1::ALLREDUCE, {0, 2}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 1, tensor 't': process_set [0, 2]: rank 1 is not in this "
                                 "process set")));
  EXPECT_THAT(check(spec_of(v1::ALLREDUCE, {1, 1, 2}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names rank 1 twice")));
  EXPECT_THAT(check(spec_of(v1::ALLREDUCE, {1, 4}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 4 is not a rank of the job (size 4)")));
  EXPECT_THAT(check(spec_of(v1::ALLREDUCE, {2, 1}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ascending")));
  EXPECT_THAT(check(spec_of(v1::BROADCAST, {0, 1}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("root_rank 3 is not in the process set")));
  EXPECT_THAT(check(spec_of(v1::ALLREDUCE, {0, 1}, /*compress=*/true), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("global process set only")));
  EXPECT_THAT(check(spec_of(v1::JOIN, {0, 1}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("join runs on every rank")));
}

TEST(LocalReduceTest, JoinedRanksAnswerOnlyForAllreducesTheyPosted) {
  TensorSpec s;
  s.name = "w.grad";
  EXPECT_EQ(JoinedRanksAnswer(s, {}, {}), "");
  EXPECT_EQ(JoinedRanksAnswer(s, std::vector<int>{1, 3}, {}), "");
  EXPECT_EQ(JoinedRanksAnswer(s, std::vector<int>{1, 3}, std::vector<int>{3}),
            "tensor 'w.grad': ranks [3] have joined (hvd.join) and never posted it, so they "
            "cannot contribute zeros to it (a joined rank answers only for allreduce names it "
            "posted before joining)");
  s.kind = CollectiveKind::kAllgather;
  EXPECT_THAT(JoinedRanksAnswer(s, std::vector<int>{1, 3}, {}),
              HasSubstr("tensor 'w.grad': allgather while ranks [1, 3] have joined"));
}

TEST(LocalReduceTest, CombinesAllreduceAllgatherAndBroadcast) {
  TensorSpec s;
  s.name = "t";
  s.shape = {3};
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  std::vector<LocalInput> in = {{4, &s, reinterpret_cast<uint8_t*>(a.data()), 12},
                                {5, &s, reinterpret_cast<uint8_t*>(b.data()), 12}};
  ASSERT_THAT(CheckLocalAgreement(in), IsOk());
  NodeTensor sum = CombineLocal(in, 1);
  std::vector<float> got(3);
  std::memcpy(got.data(), sum.data.data(), 12);
  EXPECT_THAT(got, ElementsAre(11, 22, 33));

  TensorSpec g1 = s, g2 = s;
  g1.kind = g2.kind = CollectiveKind::kAllgather;
  g1.shape = {1};
  g2.shape = {2};
  std::vector<LocalInput> gin = {{4, &g1, reinterpret_cast<uint8_t*>(a.data()), 4},
                                 {5, &g2, reinterpret_cast<uint8_t*>(b.data()), 8}};
  ASSERT_THAT(CheckLocalAgreement(gin), IsOk());
  NodeTensor gathered = CombineLocal(gin, 1);
  EXPECT_THAT(gathered.first_dims, ElementsAre(1, 2));
  EXPECT_THAT(gathered.spec.shape, ElementsAre(3));
  std::memcpy(got.data(), gathered.data.data(), 12);
  EXPECT_THAT(got, ElementsAre(1, 10, 20));

  TensorSpec bs = s;
  bs.kind = CollectiveKind::kBroadcast;
  bs.root_rank = 5;
  std::vector<LocalInput> bin = {{4, &bs, reinterpret_cast<uint8_t*>(a.data()), 12},
                                 {5, &bs, reinterpret_cast<uint8_t*>(b.data()), 12}};
  NodeTensor root = CombineLocal(bin, 1);
  std::memcpy(got.data(), root.data.data(), 12);
  EXPECT_THAT(got, ElementsAre(10, 20, 30));
  bs.root_rank = 0;  // on another node: zeros of the right size
  NodeTensor other = CombineLocal(bin, 1);
  EXPECT_EQ(other.data, std::vector<uint8_t>(12, 0));
}

TEST(LocalReduceTest, DisagreementNamesFieldAndRanks) {
  TensorSpec s, t;
  s.name = t.name = "t";
  s.shape = t.shape = {2};
  t.reduce_op = collectives::ReduceOp::kAverage;
  std::vector<LocalInput> in = {{0, &s, nullptr, 8}, {1, &t, nullptr, 8}};
  EXPECT_THAT(CheckLocalAgreement(in),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "tensor 't': op average on ranks 1 differs from sum on ranks 0"));
  t.reduce_op = s.reduce_op;
  t.step = 3;
  EXPECT_THAT(CheckLocalAgreement(in),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "tensor 't': step 3 on ranks 1 differs from -1 on ranks 0"));
}

TEST(LocalReduceTest, BufferPoolReusesLargeBuffersOfAboutTheRightSize) {
  BufferPool pool;
  std::vector<uint8_t> big(1 << 20, 1);
  const uint8_t* where = big.data();
  pool.Give(std::move(big));
  pool.Give(std::vector<uint8_t>(100));  // too small to keep
  EXPECT_EQ(pool.pooled_bytes(), size_t{1} << 20);
  EXPECT_TRUE(pool.Take(4 << 20).empty());  // none large enough
  EXPECT_EQ(pool.Take(16).capacity(), 0u);  // far too large for 16 bytes
  std::vector<uint8_t> got = pool.Take(1 << 20);
  EXPECT_EQ(got.data(), where);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  // CombineLocal writes into the storage it is given.
  TensorSpec s;
  s.name = "t";
  s.shape = {4};
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<LocalInput> in = {{0, &s, reinterpret_cast<uint8_t*>(a.data()), 16}};
  NodeTensor t = CombineLocal(in, 0, std::move(got));
  EXPECT_EQ(t.data.data(), where);
  EXPECT_EQ(t.data.size(), 16u);
}

TEST(LocalReduceTest, PooledBuffersKeepTheirSizeAndEveryByteOfTheSumIsWritten) {
  BufferPool pool;
  pool.Give(std::vector<uint8_t>(1 << 20, 0xff));  // stale contents: NaN as float
  std::vector<uint8_t> got = pool.Take(1 << 19);
  ASSERT_EQ(got.size(), size_t{1} << 20);
  const uint8_t* where = got.data();
  TensorSpec s;
  s.name = "t";
  const size_t n = (1 << 19) / sizeof(float);
  s.shape = {static_cast<int64_t>(n)};
  std::vector<float> a(n), b(n), c(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 97);
    b[i] = 0.5f;
    c[i] = -1.0f;
  }
  std::vector<LocalInput> in = {{0, &s, reinterpret_cast<uint8_t*>(a.data()), n * 4},
                                {1, &s, reinterpret_cast<uint8_t*>(b.data()), n * 4},
                                {2, &s, reinterpret_cast<uint8_t*>(c.data()), n * 4}};
  NodeTensor t = CombineLocal(in, 0, std::move(got));
  EXPECT_EQ(t.data.data(), where);
  ASSERT_EQ(t.data.size(), n * 4);
  std::vector<float> sum(n);
  std::memcpy(sum.data(), t.data.data(), n * 4);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], static_cast<float>(i % 97) - 0.5f) << i;
}

}  // namespace
}  // namespace gravac::daemon

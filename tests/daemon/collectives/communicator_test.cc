#include "daemon/collectives/communicator.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/rendezvous.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::collectives {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using transport::loopback::Fabric;
using transport::loopback::FaultKind;

transport::TransportOptions LoopbackOptions(int rank, int world_size, Fabric* fabric) {
  transport::TransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.context = fabric;
  return options;
}

// p ranks over one loopback fabric, each with its transport and communicator.
struct Group {
  explicit Group(int p) : fabric(p) {}
  Fabric fabric;
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::unique_ptr<Communicator>> comms;
};

std::unique_ptr<Group> MakeGroup(int p, const CommunicatorOptions& options) {
  auto group = std::make_unique<Group>(p);
  std::vector<std::string> addresses;
  for (int r = 0; r < p; ++r) {
    auto t = transport::MakeTransport("loopback", LoopbackOptions(r, p, &group->fabric));
    EXPECT_THAT(t, IsOk());
    addresses.push_back((*t)->LocalAddress());
    group->transports.push_back(*std::move(t));
  }
  for (int r = 0; r < p; ++r) {
    auto comm = Communicator::Connect(*group->transports[r], addresses, options);
    EXPECT_THAT(comm, IsOk());
    group->comms.push_back(*std::move(comm));
  }
  return group;
}

// Runs body(rank) on one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(int p, const std::function<absl::Status(int)>& body) {
  std::vector<absl::Status> results(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back([&, r] { results[r] = body(r); });
  for (auto& t : threads) t.join();
  return results;
}

void ExpectAllOk(const std::vector<absl::Status>& results) {
  for (size_t r = 0; r < results.size(); ++r) EXPECT_THAT(results[r], IsOk()) << "rank " << r;
}

// Small integers so every sum over <= 4 ranks is exact in fp32, fp16 and bf16.
int InputValue(int rank, size_t i) { return static_cast<int>((i * 7 + rank * 3) % 11) - 5; }

uint16_t Encode16(DataType type, float v) {
  return type == DataType::kFloat16 ? FloatToHalf(v) : FloatToBFloat16(v);
}
float Decode16(DataType type, uint16_t v) {
  return type == DataType::kFloat16 ? HalfToFloat(v) : BFloat16ToFloat(v);
}

// Input bytes of `rank` for `count` elements of `type`.
std::vector<uint8_t> MakeInput(DataType type, int rank, size_t count) {
  std::vector<uint8_t> bytes(count * DataTypeSize(type));
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(InputValue(rank, i));
    if (type == DataType::kFloat32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = Encode16(type, v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

// Checks every element of `out` against the exact sum (or the sum divided once by p).
absl::Status CheckAllreduce(DataType type, ReduceOp op, int p, size_t count,
                            const std::vector<uint8_t>& out) {
  for (size_t i = 0; i < count; ++i) {
    int sum = 0;
    for (int r = 0; r < p; ++r) sum += InputValue(r, i);
    float want = static_cast<float>(sum);
    if (op == ReduceOp::kAverage) want /= static_cast<float>(p);
    float got;
    if (type == DataType::kFloat32) {
      std::memcpy(&got, out.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, out.data() + 2 * i, 2);
      got = Decode16(type, h);
      want = Decode16(type, Encode16(type, want));
    }
    if (got != want) {
      return absl::InternalError(absl::StrFormat("element %d: got %g, want %g", i, got, want));
    }
  }
  return absl::OkStatus();
}

// ---- Allreduce: p x dtype x op, each over counts {0, 1, 7, p-1, 1000003}, in and out of place.

using AllreduceParam = std::tuple<int, DataType, ReduceOp>;
class AllreduceTest : public ::testing::TestWithParam<AllreduceParam> {};

TEST_P(AllreduceTest, EveryElementExactForAllCounts) {
  const auto [p, type, op] = GetParam();
  auto group = MakeGroup(
      p, {.chunk_bytes = 64 << 10, .max_inflight_chunks = 4, .op_timeout = absl::Seconds(20)});
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(p - 1), size_t{1000003}}) {
    for (bool in_place : {true, false}) {
      std::vector<std::vector<uint8_t>> outs(p);
      auto results = RunRanks(p, [&](int r) -> absl::Status {
        std::vector<uint8_t> in = MakeInput(type, r, count);
        const std::vector<uint8_t> original = in;
        if (in_place) {
          RETURN_IF_ERROR(group->comms[r]->Allreduce(in.data(), in.data(), count, type, op));
          outs[r] = std::move(in);
        } else {
          outs[r].assign(in.size(), 0xee);
          RETURN_IF_ERROR(group->comms[r]->Allreduce(in.data(), outs[r].data(), count, type, op));
          if (in != original) return absl::InternalError("out-of-place allreduce wrote its input");
        }
        return CheckAllreduce(type, op, p, count, outs[r]);
      });
      SCOPED_TRACE(absl::StrCat("count ", count, in_place ? " in place" : " out of place"));
      ExpectAllOk(results);
    }
  }
}

std::string AllreduceName(const ::testing::TestParamInfo<AllreduceParam>& info) {
  const auto [p, type, op] = info.param;
  return absl::StrCat("p", p, "_", std::string(DataTypeName(type)), "_",
                      std::string(ReduceOpName(op)));
}

INSTANTIATE_TEST_SUITE_P(Loopback, AllreduceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(DataType::kFloat32,
                                                              DataType::kFloat16,
                                                              DataType::kBFloat16),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAverage)),
                         AllreduceName);

TEST(AllreduceLargeTest, Fp32Over256MiBAtTwoRanks) {
  constexpr size_t kCount = size_t{64} << 20;  // 64 Mi floats = 256 MiB per rank
  auto group = MakeGroup(2, {.chunk_bytes = 4 << 20, .op_timeout = absl::Seconds(60)});
  auto results = RunRanks(2, [&](int r) -> absl::Status {
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(i % 1024 + r);
    RETURN_IF_ERROR(group->comms[r]->Allreduce(data.data(), data.data(), kCount, DataType::kFloat32,
                                               ReduceOp::kSum));
    for (size_t i = 0; i < kCount; ++i) {
      if (data[i] != static_cast<float>(2 * (i % 1024) + 1)) {
        return absl::InternalError(absl::StrCat("element ", i, " = ", data[i]));
      }
    }
    return absl::OkStatus();
  });
  ExpectAllOk(results);
}

TEST(AllreduceTinyChunksTest, OneElementChunksAndWindowOne) {
  for (int p : {2, 3}) {
    auto group = MakeGroup(p, {.chunk_bytes = 1, .max_inflight_chunks = 1});
    EXPECT_EQ(group->comms[0]->options().chunk_bytes, 8u);
    constexpr size_t kCount = 37;
    auto results = RunRanks(p, [&](int r) -> absl::Status {
      std::vector<uint8_t> data = MakeInput(DataType::kFloat16, r, kCount);
      RETURN_IF_ERROR(group->comms[r]->Allreduce(data.data(), data.data(), kCount,
                                                 DataType::kFloat16, ReduceOp::kSum));
      return CheckAllreduce(DataType::kFloat16, ReduceOp::kSum, p, kCount, data);
    });
    ExpectAllOk(results);
  }
}

// 8-byte elements never straddle two chunks: chunk_bytes is rounded down to a multiple of 8 (a
// 12-byte chunk used to split fp64 and int64 elements between two reductions).
TEST(AllreduceTinyChunksTest, EightByteElementsWithAnOddChunkSize) {
  for (int p : {2, 3}) {
    auto group = MakeGroup(p, {.chunk_bytes = 12, .max_inflight_chunks = 2});
    EXPECT_EQ(group->comms[0]->options().chunk_bytes, 8u);
    constexpr size_t kCount = 41;
    auto results = RunRanks(p, [&](int r) -> absl::Status {
      std::vector<double> d(kCount);
      std::vector<int64_t> q(kCount);
      for (size_t i = 0; i < kCount; ++i) {
        d[i] = InputValue(r, i) + 0.5;
        q[i] = int64_t{InputValue(r, i)} << 33;
      }
      RETURN_IF_ERROR(group->comms[r]->Allreduce(d.data(), d.data(), kCount, DataType::kFloat64,
                                                 ReduceOp::kSum));
      RETURN_IF_ERROR(group->comms[r]->Allreduce(q.data(), q.data(), kCount, DataType::kInt64,
                                                 ReduceOp::kSum));
      for (size_t i = 0; i < kCount; ++i) {
        double want = 0;
        int64_t want_q = 0;
        for (int rr = 0; rr < p; ++rr) {
          want += InputValue(rr, i) + 0.5;
          want_q += int64_t{InputValue(rr, i)} << 33;
        }
        if (d[i] != want || q[i] != want_q) {
          return absl::InternalError(absl::StrFormat("rank %d element %d: %g %d, want %g %d", r,
                                                     i, d[i], q[i], want, want_q));
        }
      }
      return absl::OkStatus();
    });
    ExpectAllOk(results);
  }
}

// The ring runs its 2(p-1) steps as one pipeline: chunk c of step g+1 leaves once chunk c of step
// g arrived, and an allgather chunk is received only after the reduce-scatter send of the same
// range completed. Segments whose chunk counts differ (count = 4p+1 floats in 16-byte chunks:
// one segment of 2 chunks, the rest of 1; and larger counts with a ragged last chunk), windows
// from 1 to 8 and both idle modes (sleeping, and waiting in the transport) must all be exact,
// back to back on one communicator.
TEST(AllreducePipelineTest, UnevenChunkCountsEveryWindowBothIdleModes) {
  for (int p : {2, 3, 4}) {
    for (int window : {1, 2, 3, 8}) {
      for (absl::Duration sleep : {absl::ZeroDuration(), absl::Microseconds(100)}) {
        auto group = MakeGroup(p, {.chunk_bytes = 16,
                                   .max_inflight_chunks = window,
                                   .op_timeout = absl::Seconds(20),
                                   .max_idle_sleep = sleep});
        for (size_t count : {static_cast<size_t>(4 * p + 1), size_t{1031}, size_t{4099}}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
            auto results = RunRanks(p, [&](int r) -> absl::Status {
              std::vector<uint8_t> data = MakeInput(DataType::kFloat32, r, count);
              RETURN_IF_ERROR(group->comms[r]->Allreduce(data.data(), data.data(), count,
                                                         DataType::kFloat32, op));
              return CheckAllreduce(DataType::kFloat32, op, p, count, data);
            });
            SCOPED_TRACE(absl::StrCat("p ", p, " window ", window, " sleep ",
                                      absl::FormatDuration(sleep), " count ", count, " op ",
                                      std::string(ReduceOpName(op))));
            ExpectAllOk(results);
          }
        }
      }
    }
  }
}

TEST(AllreduceTest, PartialOverlapIsRejected) {
  auto group = MakeGroup(1, {});
  std::vector<float> buffer(8, 1.0f);
  EXPECT_THAT(group->comms[0]->Allreduce(buffer.data(), buffer.data() + 1, 4, DataType::kFloat32,
                                         ReduceOp::kSum),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));
}

// ---- Allgatherv

struct AllgatherCase {
  std::vector<size_t> sizes;  // per rank
  size_t chunk_bytes;
};

uint8_t PayloadByte(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + 1); }

class AllgathervTest : public ::testing::TestWithParam<int> {};

TEST_P(AllgathervTest, ConcatenatesEveryRankInOrder) {
  const int p = GetParam();
  std::vector<AllgatherCase> cases = {
      {std::vector<size_t>(p, 0), 64},
      {std::vector<size_t>(p, 1), 64},
      {std::vector<size_t>(p, 7), 4},
      {std::vector<size_t>(p, static_cast<size_t>(p - 1)), 4},
      {std::vector<size_t>(p, 1000003), 64 << 10},
  };
  std::vector<size_t> mixed(p);
  for (int r = 0; r < p; ++r) mixed[r] = r == 0 ? 0 : static_cast<size_t>(r) * 4099 + 3;
  cases.push_back({mixed, 256});
  for (const AllgatherCase& c : cases) {
    auto group = MakeGroup(p, {.chunk_bytes = c.chunk_bytes, .max_inflight_chunks = 3});
    const size_t total = std::accumulate(c.sizes.begin(), c.sizes.end(), size_t{0});
    for (bool in_place : {false, true}) {
      auto results = RunRanks(p, [&](int r) -> absl::Status {
        size_t own_offset = 0;
        for (int i = 0; i < r; ++i) own_offset += c.sizes[i];
        std::vector<uint8_t> send(c.sizes[r]), recv(total, 0);
        uint8_t* own = in_place ? recv.data() + own_offset : send.data();
        for (size_t i = 0; i < c.sizes[r]; ++i) own[i] = PayloadByte(r, i);
        RETURN_IF_ERROR(group->comms[r]->Allgatherv(own, recv.data(), c.sizes));
        size_t offset = 0;
        for (int src = 0; src < p; ++src) {
          for (size_t i = 0; i < c.sizes[src]; ++i) {
            if (recv[offset + i] != PayloadByte(src, i)) {
              return absl::InternalError(absl::StrCat("block ", src, " byte ", i));
            }
          }
          offset += c.sizes[src];
        }
        return absl::OkStatus();
      });
      SCOPED_TRACE(absl::StrCat("rank 0 size ", c.sizes[0], in_place ? " in place" : ""));
      ExpectAllOk(results);
    }
  }
}

TEST_P(AllgathervTest, AnySizeExchangesSizesFirst) {
  const int p = GetParam();
  auto group = MakeGroup(p, {.chunk_bytes = 1024});
  // Sparse payloads as the daemon sends them: int32 indices then fp32 values, k differs by rank.
  auto results = RunRanks(p, [&](int r) -> absl::Status {
    const int k = r * 50 + (r == 1 ? 0 : 3);
    std::vector<uint8_t> payload(k * 8);
    for (int j = 0; j < k; ++j) {
      const int32_t index = r * 1000 + j;
      const float value = static_cast<float>(j) - r;
      std::memcpy(payload.data() + 4 * j, &index, 4);
      std::memcpy(payload.data() + 4 * k + 4 * j, &value, 4);
    }
    std::vector<uint8_t> recv;
    std::vector<size_t> sizes;
    RETURN_IF_ERROR(group->comms[r]->AllgathervAnySize(payload, &recv, &sizes));
    size_t offset = 0;
    for (int src = 0; src < p; ++src) {
      const int ks = src * 50 + (src == 1 ? 0 : 3);
      if (sizes[src] != static_cast<size_t>(ks) * 8) return absl::InternalError("size");
      for (int j = 0; j < ks; ++j) {
        int32_t index;
        float value;
        std::memcpy(&index, recv.data() + offset + 4 * j, 4);
        std::memcpy(&value, recv.data() + offset + 4 * ks + 4 * j, 4);
        if (index != src * 1000 + j || value != static_cast<float>(j) - src) {
          return absl::InternalError(absl::StrCat("from rank ", src, " entry ", j));
        }
      }
      offset += sizes[src];
    }
    return offset == recv.size() ? absl::OkStatus() : absl::InternalError("total");
  });
  ExpectAllOk(results);
}

INSTANTIATE_TEST_SUITE_P(Loopback, AllgathervTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("p", info.param); });

TEST(AllgathervArgsTest, WrongNumberOfSizesIsRejected) {
  auto group = MakeGroup(1, {});
  uint8_t byte = 0;
  EXPECT_THAT(group->comms[0]->Allgatherv(&byte, &byte, std::vector<size_t>{1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 sizes for 1 ranks")));
}

// ---- Broadcast

class BroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastTest, EveryRootEveryCount) {
  const int p = GetParam();
  auto group = MakeGroup(p, {.chunk_bytes = 16 << 10, .max_inflight_chunks = 2});
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(p - 1), size_t{1000003}}) {
    for (int root = 0; root < p; ++root) {
      auto results = RunRanks(p, [&](int r) -> absl::Status {
        std::vector<uint8_t> data(bytes, 0);
        if (r == root) {
          for (size_t i = 0; i < bytes; ++i) data[i] = PayloadByte(root, i);
        }
        RETURN_IF_ERROR(group->comms[r]->Broadcast(data.data(), bytes, root));
        for (size_t i = 0; i < bytes; ++i) {
          if (data[i] != PayloadByte(root, i)) return absl::InternalError(absl::StrCat("byte ", i));
        }
        return absl::OkStatus();
      });
      SCOPED_TRACE(absl::StrCat(bytes, " bytes from root ", root));
      ExpectAllOk(results);
    }
  }
  EXPECT_THAT(group->comms[0]->Broadcast(nullptr, 0, p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root")));
}

INSTANTIATE_TEST_SUITE_P(Loopback, BroadcastTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("p", info.param); });

// ---- Barrier

class BarrierTest : public ::testing::TestWithParam<int> {};

TEST_P(BarrierTest, NoRankLeavesBeforeAllEntered) {
  const int p = GetParam();
  auto group = MakeGroup(p, {});
  // The last rank is late: it enters only after it sees every other rank blocked in the barrier
  // long enough for an early exit to show up.
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> entered{0}, left{0};
    auto results = RunRanks(p, [&](int r) -> absl::Status {
      if (r == p - 1) {
        while (entered.load() < p - 1) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (left.load() != 0) return absl::InternalError("a rank left the barrier early");
      }
      entered.fetch_add(1);
      RETURN_IF_ERROR(group->comms[r]->Barrier());
      left.fetch_add(1);
      return entered.load() == p ? absl::OkStatus() : absl::InternalError("left too early");
    });
    ExpectAllOk(results);
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, BarrierTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("p", info.param); });

// ---- Sequencing

TEST(CommunicatorTest, BackToBackMixedCollectivesOverADelayedLink) {
  constexpr int kP = 3;
  auto group = MakeGroup(kP, {.chunk_bytes = 512});
  group->fabric.SetLinkDelay(2, 0, absl::Milliseconds(1));
  auto results = RunRanks(kP, [&](int r) -> absl::Status {
    for (int iter = 0; iter < 6; ++iter) {
      const size_t count = 100 + iter * 333;
      std::vector<uint8_t> data = MakeInput(DataType::kFloat32, r, count);
      RETURN_IF_ERROR(group->comms[r]->Allreduce(data.data(), data.data(), count,
                                                 DataType::kFloat32, ReduceOp::kSum));
      RETURN_IF_ERROR(CheckAllreduce(DataType::kFloat32, ReduceOp::kSum, kP, count, data));
      std::vector<uint8_t> bcast(300 + iter, r == iter % kP ? 0x5a : 0);
      RETURN_IF_ERROR(group->comms[r]->Broadcast(bcast.data(), bcast.size(), iter % kP));
      if (bcast != std::vector<uint8_t>(300 + iter, 0x5a)) return absl::InternalError("bcast");
      RETURN_IF_ERROR(group->comms[r]->Barrier());
    }
    return absl::OkStatus();
  });
  ExpectAllOk(results);
}

// Process sets: subsets of a 4-rank world run their own collectives (ranks 1 and 3, then 0, 2
// and 3), interleaved with the whole world's, over the same endpoints; ranks outside a subset
// never call it. Sums are exact over the subset's ranks only.
TEST(CommunicatorTest, SubsetsRunOnTheirRanksAloneBetweenWorldCollectives) {
  constexpr int kP = 4;
  auto group = MakeGroup(kP, {.chunk_bytes = 64});
  const std::vector<int> odd = {1, 3}, most = {0, 2, 3};
  auto results = RunRanks(kP, [&](int r) -> absl::Status {
    Communicator& world = *group->comms[r];
    std::unique_ptr<Communicator> a, b;
    if (r % 2 == 1) {
      ASSIGN_OR_RETURN(a, world.Subset(odd));
      if (a->size() != 2 || a->rank() != r / 2) return absl::InternalError("odd subset layout");
    }
    if (r != 1) {
      ASSIGN_OR_RETURN(b, world.Subset(most));
    }
    for (int iter = 0; iter < 3; ++iter) {
      const size_t count = 37 + iter * 101;
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(InputValue(r, i));
      if (a) {
        RETURN_IF_ERROR(a->Allreduce(data.data(), data.data(), count, DataType::kFloat32,
                                     ReduceOp::kSum));
        for (size_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(InputValue(1, i) + InputValue(3, i));
          if (data[i] != want) return absl::InternalError(absl::StrCat("odd element ", i));
        }
      }
      if (b) {
        std::vector<uint8_t> bytes(10 + iter, r == 3 ? 0x3c : 0);
        RETURN_IF_ERROR(b->Broadcast(bytes.data(), bytes.size(), /*root=*/2));  // rank 3
        if (bytes != std::vector<uint8_t>(10 + iter, 0x3c)) return absl::InternalError("bcast");
        std::vector<uint8_t> recv;
        std::vector<size_t> sizes;
        const std::vector<uint8_t> mine(r + 1, static_cast<uint8_t>(r));
        RETURN_IF_ERROR(b->AllgathervAnySize(mine, &recv, &sizes));
        if (recv != std::vector<uint8_t>{0, 2, 2, 2, 3, 3, 3, 3}) {
          return absl::InternalError("subset allgather");
        }
      }
      RETURN_IF_ERROR(world.Barrier());
    }
    return absl::OkStatus();
  });
  ExpectAllOk(results);
  EXPECT_THAT(group->comms[0]->Subset(std::vector<int>{1, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not in the subset")));
  EXPECT_THAT(group->comms[0]->Subset(std::vector<int>{0, 0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("distinct, ascending")));
  EXPECT_THAT(group->comms[0]->Subset(std::vector<int>{0, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("in 0..3")));
}

TEST(CommunicatorTest, ConnectsThroughAFileRendezvous) {
  constexpr int kP = 3;
  Fabric fabric(kP);
  const std::string dir = absl::StrCat("/tmp/gravac-collectives-rdv-", getpid());
  std::filesystem::remove_all(dir);
  auto results = RunRanks(kP, [&](int r) -> absl::Status {
    ASSIGN_OR_RETURN(auto t, transport::MakeTransport("loopback", LoopbackOptions(r, kP, &fabric)));
    transport::FileRendezvous rendezvous(dir, r, kP, absl::Seconds(10));
    ASSIGN_OR_RETURN(std::vector<std::string> addresses, rendezvous.Exchange(t->LocalAddress()));
    ASSIGN_OR_RETURN(auto comm, Communicator::Connect(*t, addresses, {}));
    std::vector<uint8_t> data = MakeInput(DataType::kBFloat16, r, 1001);
    RETURN_IF_ERROR(
        comm->Allreduce(data.data(), data.data(), 1001, DataType::kBFloat16, ReduceOp::kAverage));
    RETURN_IF_ERROR(CheckAllreduce(DataType::kBFloat16, ReduceOp::kAverage, kP, 1001, data));
    return comm->Barrier();  // keeps every communicator alive until all are done
  });
  std::filesystem::remove_all(dir);
  ExpectAllOk(results);
}

TEST(CommunicatorTest, CreateValidatesThePeerTable) {
  std::vector<std::unique_ptr<transport::Endpoint>> none(2);
  EXPECT_THAT(Communicator::Create(0, std::move(none), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("peers[1]")));
  EXPECT_THAT(Communicator::Create(0, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---- Faults: every surviving rank fails, with a message naming itself, the collective and the
// peer, within a bounded time; never a hang.

constexpr absl::Duration kFaultTimeout = absl::Milliseconds(300);
constexpr absl::Duration kSlack = absl::Milliseconds(700);

struct Outcome {
  absl::Status status;
  absl::Duration elapsed;
};

std::vector<Outcome> RunAllreduceWithFault(Group& group, int p, size_t count) {
  std::vector<Outcome> outcomes(p);
  RunRanks(p, [&](int r) -> absl::Status {
    std::vector<float> data(count, 1.0f);
    const absl::Time start = absl::Now();
    outcomes[r].status = group.comms[r]->Allreduce(data.data(), data.data(), count,
                                                   DataType::kFloat32, ReduceOp::kSum);
    outcomes[r].elapsed = absl::Now() - start;
    return absl::OkStatus();
  });
  return outcomes;
}

TEST(CommunicatorFaultTest, SilentPeerFailsEveryOtherRankWithinTheTimeout) {
  for (int p : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("p ", p));
    auto group = MakeGroup(p, {.chunk_bytes = 4096, .op_timeout = kFaultTimeout});
    const int silent = p - 1;
    group->fabric.SilenceRank(silent);
    std::vector<Outcome> outcomes = RunAllreduceWithFault(*group, p, 100000);
    bool someone_named_the_silent_peer = false;
    for (int r = 0; r < p; ++r) {
      if (r == silent) continue;
      EXPECT_THAT(outcomes[r].status,
                  AnyOf(StatusIs(absl::StatusCode::kDeadlineExceeded,
                                 HasSubstr(absl::StrFormat(
                                     "rank %d: allreduce: no progress from peer rank", r))),
                        StatusIs(absl::StatusCode::kUnavailable,
                                 HasSubstr(absl::StrFormat("rank %d: allreduce: peer rank", r)))))
          << "rank " << r;
      EXPECT_LT(outcomes[r].elapsed, kFaultTimeout + kSlack) << "rank " << r;
      someone_named_the_silent_peer |=
          absl::StrContains(outcomes[r].status.message(),
                            absl::StrFormat("no progress from peer rank %d within 300ms", silent));
    }
    EXPECT_TRUE(someone_named_the_silent_peer);
  }
}

TEST(CommunicatorFaultTest, PeerSilencedMidCollective) {
  constexpr int kP = 4;
  auto group = MakeGroup(kP, {.chunk_bytes = 4096, .op_timeout = kFaultTimeout});
  group->fabric.FaultAfterMessages(2, 40, FaultKind::kSilence);
  std::vector<Outcome> outcomes = RunAllreduceWithFault(*group, kP, 400000);
  EXPECT_EQ(group->fabric.messages_sent(2), 40);
  for (int r = 0; r < kP; ++r) {
    if (r == 2) continue;
    EXPECT_FALSE(outcomes[r].status.ok()) << "rank " << r;
    EXPECT_THAT(outcomes[r].status.message(), HasSubstr(absl::StrFormat("rank %d: allreduce", r)));
    EXPECT_LT(outcomes[r].elapsed, kFaultTimeout + kSlack) << "rank " << r;
  }
}

TEST(CommunicatorFaultTest, PeerClosingMidCollectiveFailsEveryRankFast) {
  constexpr int kP = 4;
  // A long timeout: the failure must come from the closed connection, not from waiting.
  auto group = MakeGroup(kP, {.chunk_bytes = 4096, .op_timeout = absl::Seconds(30)});
  group->fabric.FaultAfterMessages(1, 25, FaultKind::kClose);
  std::vector<Outcome> outcomes = RunAllreduceWithFault(*group, kP, 400000);
  for (int r = 0; r < kP; ++r) {
    EXPECT_THAT(outcomes[r].status,
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr(absl::StrFormat("rank %d: allreduce: peer rank", r))))
        << "rank " << r;
    EXPECT_LT(outcomes[r].elapsed, absl::Seconds(5)) << "rank " << r;
  }
  // Aborted: later calls fail at once, carrying the first error.
  float x = 0;
  EXPECT_THAT(group->comms[0]->Barrier(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("aborted")));
  EXPECT_THAT(group->comms[0]->Allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(CommunicatorFaultTest, PeerThatGoesAwayFailsTheOthers) {
  constexpr int kP = 3;
  auto group = MakeGroup(kP, {.op_timeout = absl::Seconds(30)});
  std::vector<Outcome> outcomes(kP);
  RunRanks(kP, [&](int r) -> absl::Status {
    if (r == 1) {  // exits instead of joining the collective
      group->comms[1].reset();
      return absl::OkStatus();
    }
    std::vector<uint8_t> data(1000);
    const absl::Time start = absl::Now();
    outcomes[r].status = group->comms[r]->Broadcast(data.data(), data.size(), 0);
    outcomes[r].elapsed = absl::Now() - start;
    return absl::OkStatus();
  });
  for (int r : {0, 2}) {
    EXPECT_THAT(outcomes[r].status, StatusIs(absl::StatusCode::kUnavailable,
                                             HasSubstr(absl::StrFormat("rank %d: broadcast", r))));
    EXPECT_LT(outcomes[r].elapsed, absl::Seconds(5));
  }
}

TEST(CommunicatorFaultTest, SilentPeerInBarrierAndAllgatherv) {
  constexpr int kP = 3;
  for (bool barrier : {true, false}) {
    auto group = MakeGroup(kP, {.op_timeout = kFaultTimeout});
    group->fabric.SilenceRank(0);
    std::vector<Outcome> outcomes(kP);
    RunRanks(kP, [&](int r) -> absl::Status {
      const absl::Time start = absl::Now();
      std::vector<uint8_t> buffer(30, 1);
      outcomes[r].status = barrier ? group->comms[r]->Barrier()
                                   : group->comms[r]->Allgatherv(buffer.data() + 10 * r,
                                                                 buffer.data(), {10, 10, 10});
      outcomes[r].elapsed = absl::Now() - start;
      return absl::OkStatus();
    });
    const std::string name = barrier ? "barrier" : "allgatherv";
    for (int r : {1, 2}) {
      EXPECT_THAT(outcomes[r].status.message(), HasSubstr(absl::StrCat("rank ", r, ": ", name)));
      EXPECT_FALSE(outcomes[r].status.ok());
      EXPECT_LT(outcomes[r].elapsed, kFaultTimeout + kSlack);
    }
  }
}

}  // namespace
}  // namespace gravac::collectives

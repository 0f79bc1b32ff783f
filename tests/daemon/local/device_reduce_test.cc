// The local reduce in device memory (daemon/local/device_reduce.h) on fake device backends (the
// CPU kernels on fake device memory that refuses host pointers): the node's sum of 1 to 4
// workers is CombineLocal's host sum bit for bit (negative zeros, NaN, non-multiple sizes
// included, into fresh and reused buffers), stays in device memory until copied out, and bad
// input is named. The sums' buffers come from a pool per device: a steady step allocates nothing
// after its first, sums held at once get buffers of their own, a released buffer is reused, the
// bound frees the oldest free buffers first when sizes change, a sum may outlive the reducer,
// and sums made and released on several threads at once stay right (run under TSan too).
#include "daemon/local/device_reduce.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "daemon/local/local_reduce.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/engine/fake_device_backend.h"

namespace gravac::daemon {
namespace {

using ::gravac::daemon::testing::FakeDeviceBackend;
using ::gravac::daemon::testing::FakeDeviceBackends;
using ::gravac::daemon::testing::FakeDeviceMemory;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// Bytes of floats, compared exactly (NaN and -0 included).
std::vector<uint8_t> Bytes(const void* p, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + bytes);
}

// Workers' buffers of fp32 on fake device `device` (as the local side maps them) and their host
// copies, for one sum.
struct Inputs {
  std::vector<std::vector<float>> host;
  std::vector<std::unique_ptr<kernels::BackendMemory>> mapped;
  std::vector<const void*> ptrs;
  size_t bytes = 0;
};

Inputs MakeInputs(const std::shared_ptr<FakeDeviceMemory>& memory, int workers, int64_t n,
                  uint32_t seed) {
  FakeDeviceBackend device(0, memory);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Inputs in;
  in.bytes = static_cast<size_t>(n) * sizeof(float);
  for (int w = 0; w < workers; ++w) {
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = normal(rng);
    auto block = device.Allocate(in.bytes);
    EXPECT_THAT(block, IsOk());
    EXPECT_THAT(device.CopyFromHost((*block)->data(), values.data(), in.bytes), IsOk());
    in.ptrs.push_back((*block)->data());
    in.mapped.push_back(*std::move(block));
    in.host.push_back(std::move(values));
  }
  return in;
}

// CombineLocal's host sum of `in`, as bytes.
std::vector<uint8_t> HostSum(const Inputs& in) {
  TensorSpec spec;
  spec.name = "w";
  spec.shape = {static_cast<int64_t>(in.bytes / sizeof(float))};
  std::vector<LocalInput> local;
  for (size_t w = 0; w < in.host.size(); ++w) {
    local.push_back(LocalInput{static_cast<int>(w), &spec,
                               reinterpret_cast<const uint8_t*>(in.host[w].data()), in.bytes});
  }
  const NodeTensor sum = CombineLocal(local, 0);
  return sum.data;
}

std::vector<uint8_t> ToHost(const DeviceData& d) {
  std::vector<uint8_t> out(d.bytes());
  EXPECT_THAT(d.CopyToHost(out.data()), IsOk());
  return out;
}

// The sizes of the live blocks of fake device memory.
std::vector<size_t> LiveBlocks(FakeDeviceMemory& memory) {
  std::lock_guard<std::mutex> lock(memory.mu);
  std::vector<size_t> sizes;
  for (const auto& [base, bytes] : memory.blocks) sizes.push_back(bytes);
  return sizes;
}

// The pool's bound: free plus held bytes within the most bytes ever held at once.
void ExpectBound(const DeviceBufferPool::Counts& c) {
  EXPECT_LE(c.free_bytes + c.held_bytes, c.high_water_bytes)
      << "free " << c.free_bytes << ", held " << c.held_bytes;
}

TEST(DeviceReduceTest, SumsAreCombineLocalsBitForBit) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  BackendDeviceReduce reduce(FakeDeviceBackends(memory));
  FakeDeviceBackend workers(1, memory);  // the workers' mapped buffers, on device 1
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  TensorSpec spec;
  spec.name = "w";
  for (const int count : {1, 2, 3, 4}) {
    for (const int64_t n : {0, 1, 1001}) {
      SCOPED_TRACE(absl::StrFormat("%d workers, %d elements", count, n));
      spec.shape = {n};
      const size_t bytes = static_cast<size_t>(n) * sizeof(float);
      std::vector<std::vector<float>> host(count);
      std::vector<std::unique_ptr<kernels::BackendMemory>> mapped;
      std::vector<const void*> inputs;
      std::vector<LocalInput> local;
      for (int w = 0; w < count; ++w) {
        for (int64_t i = 0; i < n; ++i) host[w].push_back(normal(rng));
        if (n > 0) host[w][0] = -0.0f;  // -0 + -0 = -0, a copy keeps it
        if (n > 1 && w == 1) host[w][1] = std::numeric_limits<float>::quiet_NaN();
        auto block = workers.Allocate(bytes);
        ASSERT_THAT(block, IsOk());
        ASSERT_THAT(workers.CopyFromHost((*block)->data(), host[w].data(), bytes), IsOk());
        inputs.push_back((*block)->data());
        mapped.push_back(*std::move(block));
        local.push_back(
            LocalInput{w, &spec, reinterpret_cast<const uint8_t*>(host[w].data()), bytes});
      }
      const NodeTensor want = CombineLocal(local, 0);
      const int64_t to_host = memory->to_host;
      absl::StatusOr<std::shared_ptr<const DeviceData>> sum = reduce.SumFloat32(1, inputs, bytes);
      ASSERT_THAT(sum, IsOk());
      EXPECT_EQ(memory->to_host, to_host);  // nothing left the device
      EXPECT_EQ((*sum)->device(), 1);
      ASSERT_EQ((*sum)->bytes(), bytes);
      EXPECT_TRUE(memory->Owns((*sum)->data(), bytes));
      std::vector<uint8_t> got(bytes);
      ASSERT_THAT((*sum)->CopyToHost(got.data()), IsOk());
      EXPECT_EQ(got, Bytes(want.data.data(), want.data.size()));
    }
  }
}

TEST(DeviceReduceTest, SteadyStepAllocatesOnlyInItsFirst) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  BackendDeviceReduce reduce(FakeDeviceBackends(memory));
  // A step of three fused tensors held at once (two of the same size), as the engine holds them.
  const Inputs a = MakeInputs(memory, 2, 1001, 1);
  const Inputs b = MakeInputs(memory, 3, 1001, 2);
  const Inputs c = MakeInputs(memory, 4, 7, 3);
  const std::vector<uint8_t> want_a = HostSum(a), want_b = HostSum(b), want_c = HostSum(c);
  const int64_t before = memory->allocations;
  std::vector<const void*> first_step;
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(absl::StrFormat("step %d", step));
    auto sa = reduce.SumFloat32(0, a.ptrs, a.bytes);
    auto sb = reduce.SumFloat32(0, b.ptrs, b.bytes);
    auto sc = reduce.SumFloat32(0, c.ptrs, c.bytes);
    ASSERT_THAT(sa, IsOk());
    ASSERT_THAT(sb, IsOk());
    ASSERT_THAT(sc, IsOk());
    EXPECT_EQ(ToHost(**sa), want_a);
    EXPECT_EQ(ToHost(**sb), want_b);
    EXPECT_EQ(ToHost(**sc), want_c);
    EXPECT_EQ(memory->allocations - before, 3);  // the first step's, none after
    const std::vector<const void*> buffers = {(*sa)->data(), (*sb)->data(), (*sc)->data()};
    if (step == 0) {
      first_step = buffers;
    } else {
      EXPECT_THAT(buffers, UnorderedElementsAreArray(first_step));
    }
    const DeviceBufferPool::Counts counts = reduce.PoolCounts(0);
    EXPECT_EQ(counts.held_bytes, a.bytes + b.bytes + c.bytes);
    EXPECT_EQ(counts.free_bytes, 0u);
    EXPECT_EQ(counts.allocations, 3);
    EXPECT_EQ(counts.reuses, 3 * step);
  }
  const DeviceBufferPool::Counts counts = reduce.PoolCounts(0);
  EXPECT_EQ(counts.held_bytes, 0u);
  EXPECT_EQ(counts.free_bytes, a.bytes + b.bytes + c.bytes);
  EXPECT_EQ(counts.high_water_bytes, a.bytes + b.bytes + c.bytes);
  EXPECT_EQ(reduce.PoolCounts(1).allocations, 0);  // a pool per device
}

TEST(DeviceReduceTest, HeldSumsGetBuffersOfTheirOwnAndAReleasedOneIsReused) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  BackendDeviceReduce reduce(FakeDeviceBackends(memory));
  const Inputs a = MakeInputs(memory, 2, 64, 4);
  const Inputs b = MakeInputs(memory, 2, 64, 5);
  const int64_t before = memory->allocations;
  auto first = reduce.SumFloat32(0, a.ptrs, a.bytes);
  auto second = reduce.SumFloat32(0, b.ptrs, b.bytes);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(memory->allocations - before, 2);
  EXPECT_NE((*first)->data(), (*second)->data());
  EXPECT_EQ(ToHost(**first), HostSum(a));  // the second sum did not write into the first
  const void* released = (*first)->data();
  first->reset();  // the last reference: back to the pool, not freed
  EXPECT_TRUE(memory->Owns(released, a.bytes));
  auto third = reduce.SumFloat32(0, b.ptrs, b.bytes);
  ASSERT_THAT(third, IsOk());
  EXPECT_EQ((*third)->data(), released);
  EXPECT_EQ(memory->allocations - before, 2);
  EXPECT_EQ(ToHost(**third), HostSum(b));  // a's sum overwritten, bit for bit b's
  EXPECT_EQ(ToHost(**second), HostSum(b));
  // Another reference keeps the buffer out of the pool.
  std::shared_ptr<const DeviceData> copy = *second;
  second->reset();
  auto fourth = reduce.SumFloat32(0, a.ptrs, a.bytes);
  ASSERT_THAT(fourth, IsOk());
  EXPECT_NE((*fourth)->data(), copy->data());
  EXPECT_EQ(memory->allocations - before, 3);
  EXPECT_EQ(ToHost(*copy), HostSum(b));
}

TEST(DeviceReduceTest, BoundFreesTheOldestFreeBuffersFirstWhenSizesChange) {
  // Sums of 100, 200 and 300 bytes held at once (high-water mark 600), released in one order or
  // the other; then a sum of 152 bytes: free + held may be 600 at most, so free bytes must drop
  // to 448, freeing the oldest released first.
  for (const bool smallest_first : {true, false}) {
    SCOPED_TRACE(smallest_first ? "released 100, 200, 300" : "released 300, 200, 100");
    auto memory = std::make_shared<FakeDeviceMemory>();
    BackendDeviceReduce reduce(FakeDeviceBackends(memory));
    std::vector<std::shared_ptr<const DeviceData>> held;
    for (const int64_t n : {25, 50, 75}) {
      const Inputs in = MakeInputs(memory, 2, n, static_cast<uint32_t>(n));
      auto sum = reduce.SumFloat32(0, in.ptrs, in.bytes);
      ASSERT_THAT(sum, IsOk());
      held.push_back(*std::move(sum));
    }  // the inputs are freed: the live blocks are the pool's
    if (!smallest_first) std::reverse(held.begin(), held.end());
    for (auto& sum : held) sum.reset();
    EXPECT_THAT(LiveBlocks(*memory), UnorderedElementsAreArray({100u, 200u, 300u}));
    DeviceBufferPool::Counts counts = reduce.PoolCounts(0);
    EXPECT_EQ(counts.free_bytes, 600u);
    EXPECT_EQ(counts.high_water_bytes, 600u);

    const Inputs in = MakeInputs(memory, 2, 38, 6);
    auto sum = reduce.SumFloat32(0, in.ptrs, in.bytes);
    ASSERT_THAT(sum, IsOk());
    EXPECT_EQ(ToHost(**sum), HostSum(in));
    counts = reduce.PoolCounts(0);
    ExpectBound(counts);
    EXPECT_EQ(counts.held_bytes, 152u);
    EXPECT_EQ(counts.high_water_bytes, 600u);
    // The inputs' two blocks of 152 bytes, the new sum, and what the bound kept: 300 bytes.
    EXPECT_EQ(counts.free_bytes, 300u);
    if (smallest_first) {
      EXPECT_THAT(LiveBlocks(*memory), UnorderedElementsAreArray({152u, 152u, 152u, 300u}));
    } else {
      EXPECT_THAT(LiveBlocks(*memory), UnorderedElementsAreArray({152u, 152u, 152u, 100u, 200u}));
    }
    // A kept buffer of the size asked for is reused.
    const Inputs kept = MakeInputs(memory, 2, smallest_first ? 75 : 50, 7);
    const int64_t allocations = memory->allocations;
    auto reused = reduce.SumFloat32(0, kept.ptrs, kept.bytes);
    ASSERT_THAT(reused, IsOk());
    EXPECT_EQ(memory->allocations, allocations);
    EXPECT_EQ(ToHost(**reused), HostSum(kept));
    reused->reset();
    // Held bytes at a new high-water mark leave no room for free buffers: all are freed.
    const Inputs big = MakeInputs(memory, 1, 200, 8);
    auto large = reduce.SumFloat32(0, big.ptrs, big.bytes);
    ASSERT_THAT(large, IsOk());
    EXPECT_EQ(ToHost(**large), HostSum(big));
    counts = reduce.PoolCounts(0);
    ExpectBound(counts);
    EXPECT_EQ(counts.held_bytes, 952u);
    EXPECT_EQ(counts.high_water_bytes, 952u);
    EXPECT_EQ(counts.free_bytes, 0u);
  }
}

TEST(DeviceReduceTest, SumOutlivesTheReducer) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  std::shared_ptr<const DeviceData> sum, pooled_once;
  std::vector<uint8_t> want;
  {
    const Inputs in = MakeInputs(memory, 3, 333, 8);
    want = HostSum(in);
    auto reduce = std::make_unique<BackendDeviceReduce>(FakeDeviceBackends(memory));
    auto first = reduce->SumFloat32(0, in.ptrs, in.bytes);
    ASSERT_THAT(first, IsOk());
    first->reset();  // a free buffer in the pool
    auto made = reduce->SumFloat32(2, in.ptrs, in.bytes);
    auto again = reduce->SumFloat32(0, in.ptrs, in.bytes);
    ASSERT_THAT(made, IsOk());
    ASSERT_THAT(again, IsOk());
    sum = *std::move(made);
    pooled_once = *std::move(again);
    reduce.reset();  // the reducer goes first
  }
  // The inputs are freed; the sums are still readable through their devices' backends.
  EXPECT_EQ(ToHost(*sum), want);
  EXPECT_EQ(ToHost(*pooled_once), want);
  EXPECT_EQ(LiveBlocks(*memory).size(), 2u);
  sum.reset();          // back to device 2's pool, freed with it
  pooled_once.reset();  // back to device 0's pool, freed with it
  EXPECT_TRUE(LiveBlocks(*memory).empty());
}

TEST(DeviceReduceTest, SumsMadeAndReleasedOnSeveralThreads) {
  // Three local-side threads sum tensors of three sizes on one device; each hands every other sum
  // to an "engine" thread that reads and releases it, and releases the rest itself.
  auto memory = std::make_shared<FakeDeviceMemory>();
  BackendDeviceReduce reduce(FakeDeviceBackends(memory));
  std::vector<Inputs> inputs;
  std::vector<std::vector<uint8_t>> want;
  for (const int64_t n : {1, 300, 4097}) {
    inputs.push_back(MakeInputs(memory, 2, n, static_cast<uint32_t>(n)));
    want.push_back(HostSum(inputs.back()));
  }
  std::mutex mu;
  std::deque<std::pair<size_t, std::shared_ptr<const DeviceData>>> to_engine;  // guarded by mu
  bool done = false;                                                           // guarded by mu
  int wrong = 0;                                                               // guarded by mu
  std::thread engine([&] {
    for (;;) {
      std::pair<size_t, std::shared_ptr<const DeviceData>> item;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (to_engine.empty() && done) return;
        if (!to_engine.empty()) {
          item = std::move(to_engine.front());
          to_engine.pop_front();
        }
      }
      if (item.second == nullptr) {
        std::this_thread::yield();
        continue;
      }
      const bool right = ToHost(*item.second) == want[item.first];
      item.second.reset();
      std::lock_guard<std::mutex> lock(mu);
      if (!right) ++wrong;
    }
  });
  constexpr int kThreads = 3;
  constexpr int kSums = 200;
  std::vector<std::thread> local;
  for (int t = 0; t < kThreads; ++t) {
    local.emplace_back([&, t] {
      std::vector<std::shared_ptr<const DeviceData>> mine;
      for (int i = 0; i < kSums; ++i) {
        const size_t which = static_cast<size_t>(i + t) % inputs.size();
        auto sum = reduce.SumFloat32(0, inputs[which].ptrs, inputs[which].bytes);
        ASSERT_THAT(sum, IsOk());
        if (i % 2 == 0) {
          std::lock_guard<std::mutex> lock(mu);
          to_engine.emplace_back(which, *std::move(sum));
          continue;
        }
        const bool right = ToHost(**sum) == want[which];
        mine.push_back(*std::move(sum));
        if (mine.size() > 2) mine.erase(mine.begin());
        std::lock_guard<std::mutex> lock(mu);
        if (!right) ++wrong;
      }
    });
  }
  for (std::thread& t : local) t.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  engine.join();
  EXPECT_EQ(wrong, 0);
  const DeviceBufferPool::Counts counts = reduce.PoolCounts(0);
  EXPECT_EQ(counts.held_bytes, 0u);
  ExpectBound(counts);
  EXPECT_EQ(counts.allocations + counts.reuses, kThreads * kSums);
  EXPECT_GT(counts.reuses, 0);
}

TEST(DeviceReduceTest, BadInputIsNamed) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  BackendDeviceReduce reduce(FakeDeviceBackends(memory));
  std::vector<float> host(8, 1.0f);
  const void* on_host[] = {host.data(), host.data()};
  // Host memory handed as device memory: the backend refuses it (a GPU would fault).
  EXPECT_THAT(reduce.SumFloat32(0, on_host, 32),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::AllOf(HasSubstr("local reduce on CUDA device 0"),
                                        HasSubstr("not this device's memory"))));
  EXPECT_THAT(reduce.SumFloat32(0, {}, 32), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(reduce.SumFloat32(0, on_host, 6), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(reduce.SumFloat32(-1, on_host, 32), StatusIs(absl::StatusCode::kInvalidArgument));
  BackendDeviceReduce no_device(
      [](int device) -> absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> {
        return absl::FailedPreconditionError(absl::StrFormat("fake: device %d unusable", device));
      });
  EXPECT_THAT(no_device.Prepare(2), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(reduce.Prepare(0), IsOk());
  EXPECT_THAT(no_device.SumFloat32(2, on_host, 32),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no local reduce on CUDA device 2: fake: device 2 unusable")));
}

}  // namespace
}  // namespace gravac::daemon

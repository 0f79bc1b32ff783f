// The local reduce in device memory (daemon/local/device_reduce.h) on fake device backends (the
// CPU kernels on fake device memory that refuses host pointers): the node's sum of 1 to 4
// workers is CombineLocal's host sum bit for bit (negative zeros, NaN, non-multiple sizes
// included), stays in device memory until copied out, and bad input is named.
#include "daemon/local/device_reduce.h"

#include <cstring>
#include <limits>
#include <memory>
#include <random>
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

// Bytes of floats, compared exactly (NaN and -0 included).
std::vector<uint8_t> Bytes(const void* p, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + bytes);
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
        local.push_back(LocalInput{w, &spec, reinterpret_cast<const uint8_t*>(host[w].data()),
                                   bytes});
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

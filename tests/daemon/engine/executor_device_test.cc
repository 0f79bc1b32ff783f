// Device tensors on a device compression backend without a GPU: the engine's error-feedback top-k
// (daemon/engine/backend_compression.h) on FakeDeviceBackend, which says what the CUDA backend
// says and runs the CPU twins of its kernels on memory of its own, failing any call handed host
// memory. Two nodes run the steps of executor_backend_test.cc: results and residuals are the CPU
// compressor path's bit for bit, the statistics' norms are the backend's SumSquares (the CUDA
// twin's order) of g and both levels, and nothing of the gradient's size crosses to the host for
// them: only the sent message (or p on a dense step).
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "daemon/engine/backend_compression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressed.h"
#include "tests/daemon/engine/executor_pair.h"
#include "tests/daemon/engine/fake_device_backend.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT

TEST(ExecutorDeviceTest, DeviceTensorsOnADeviceBackendMatchTheCpuCompressorPath) {
  auto copies = std::make_shared<FakeDeviceMemory>();
  ExpectSameAsTheCpuCompressorPath(MemoryType::kDevice, "fake-cuda", NormOrder::kSumSquares,
                                   FakeDeviceBackends(copies));
}

// The node's sum reduced in device memory (NodeTensor::device_data) is compensated in place on
// the device backend: the same results, residuals and norms as a sum in host memory.
TEST(ExecutorDeviceTest, ADeviceSumIsCompressedInPlaceWithTheSameResults) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  ExpectSameAsTheCpuCompressorPath(MemoryType::kDevice, "fake-cuda", NormOrder::kSumSquares,
                                   FakeDeviceBackends(memory), memory);
}

// Per step, the bytes copied to the host are the sent message's (k int32 indices + k floats), or
// p's on a dense step: ‖g‖ and both levels' norms come from the device, and the level that is
// not sent stays there. g is copied to the device when it reached the engine in host memory
// (reduced on the host), and not at all when it is a device sum.
TEST(ExecutorDeviceTest, OnlyTheSentMessageCrossesToTheHost) {
  for (const bool device_sum : {false, true}) {
    SCOPED_TRACE(device_sum ? "device sum" : "host sum");
    auto memory = std::make_shared<FakeDeviceMemory>();
    ExecutorJob job(1, "topk", true, kernels::ValueType::kFloat32, nullptr,
                    FakeDeviceBackends(memory));
    std::mt19937 rng(5);
    constexpr int64_t kN = 200000;
    for (size_t s = 0; s < kSteps.size(); ++s) {
      const PlannedStep& step = kSteps[s];
      SCOPED_TRACE(::testing::Message() << "step " << s << " at theta " << step.theta);
      std::vector<StepTensor> t = {{"conv", {Gradient(rng, kN)}, MemoryType::kDevice, 0}};
      if (device_sum) t[0].device_sums = memory;
      const int64_t sum_bytes = device_sum ? 4 * kN : 0;  // FakeDeviceData::Make's own copy
      const int64_t to_host = memory->to_host, from_host = memory->from_host + sum_bytes;
      const auto r = job.Run(static_cast<int64_t>(s), step.theta, step.theta_c, t);
      ASSERT_THAT(r[0][0].status, IsOk());
      const int64_t sent = step.theta > 1 ? 8 * kernels::KeepCount(kN, step.theta) : 4 * kN;
      EXPECT_EQ(memory->to_host - to_host, sent);
      EXPECT_EQ(memory->from_host - from_host, device_sum ? 0 : 4 * kN);
      EXPECT_EQ(job.executor(0).ResidualBackend("conv"), "fake-cuda");
    }
  }
}

// A device sum whose device has no compression backend (no CUDA there) is copied to host memory
// and compressed on the CPU backend, with the CPU compressor path's results and norms.
TEST(ExecutorDeviceTest, ADeviceSumWithoutADeviceBackendIsCopiedToTheHost) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  auto none = [](int device) -> absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> {
    return absl::FailedPreconditionError(absl::StrFormat("fake: no backend on device %d", device));
  };
  ExpectSameAsTheCpuCompressorPath(MemoryType::kDevice, "cpu", NormOrder::kL2Norm, none, memory);
}

// Paths that need the sum in host memory (a compressor the backends do not run, dense steps of
// uncompressed tensors) copy it there: the same results as a sum handed over in host memory.
TEST(ExecutorDeviceTest, PathsInHostMemoryCopyADeviceSumThere) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  for (const char* compressor : {"randomk", "topk"}) {
    SCOPED_TRACE(compressor);
    ExecutorJob on_device(2, compressor, true, kernels::ValueType::kFloat32, nullptr,
                          FakeDeviceBackends(memory));
    ExecutorJob on_host(2, compressor, true, kernels::ValueType::kFloat32, nullptr,
                        FakeDeviceBackends(memory));
    std::mt19937 rng(11);
    for (const double theta : {10.0, 1.0, 40.0}) {
      std::vector<StepTensor> host = Tensors(rng, 2, MemoryType::kDevice);
      std::vector<StepTensor> device = host;
      for (StepTensor& t : device) t.device_sums = memory;
      const auto got = on_device.Run(0, theta, 40, device);
      const auto want = on_host.Run(0, theta, 40, host);
      for (int n = 0; n < 2; ++n) {
        for (size_t t = 0; t < host.size(); ++t) {
          ASSERT_THAT(got[n][t].status, IsOk());
          EXPECT_EQ(Values<float>(got[n][t].data), Values<float>(want[n][t].data)) << theta;
        }
      }
      EXPECT_EQ(on_device.executor(0).Residual("conv"), on_host.executor(0).Residual("conv"));
    }
  }
}

// A non-finite gradient fails the tensor on every node with the CPU compressor path's message
// (the tensor and the first bad index), keeps the residual on the device, and the next step works.
TEST(ExecutorDeviceTest, NonFiniteGradientFailsAsOnTheCpuCompressorPath) {
  ExecutorJob on_device(2, "topk", true, kernels::ValueType::kFloat32, nullptr,
                        FakeDeviceBackends(std::make_shared<FakeDeviceMemory>()));
  ExecutorJob reference(2, "topk", false);
  std::mt19937 rng(4);
  const std::vector<StepTensor> first = Tensors(rng, 2, MemoryType::kDevice);
  on_device.Run(0, 10, 40, first);
  reference.Run(0, 10, 40, first);
  const std::vector<float> kept = on_device.executor(1).Residual("fc");
  std::vector<StepTensor> bad = Tensors(rng, 2, MemoryType::kDevice);
  bad[1].grads[1][17] = std::numeric_limits<float>::quiet_NaN();
  for (double theta : {10.0, 40.0, 1.0}) {
    const auto got = on_device.Run(1, theta, 40, bad);
    const auto want = reference.Run(1, theta, 40, bad);
    for (int n = 0; n < 2; ++n) {
      EXPECT_THAT(got[n][0].status, IsOk());
      if (theta > 1) {
        EXPECT_THAT(got[n][1].status, StatusIs(absl::StatusCode::kInvalidArgument,
                                               ::testing::AllOf(::testing::HasSubstr("'fc'"),
                                                                ::testing::HasSubstr("index 17"))));
      }
      EXPECT_EQ(got[n][1].status, want[n][1].status) << "theta " << theta;
    }
    EXPECT_EQ(on_device.executor(1).Residual("fc"), kept) << "theta " << theta;
    EXPECT_EQ(on_device.executor(1).ResidualBackend("fc"), "fake-cuda");
  }
  const auto next = on_device.Run(2, 10, 40, Tensors(rng, 2, MemoryType::kDevice));
  for (int n = 0; n < 2; ++n) EXPECT_THAT(next[n][1].status, IsOk());
}

// A compressed fp32 device tensor of n elements.
TensorSpec DeviceSpec(const std::string& name, int64_t n) {
  TensorSpec spec;
  spec.name = name;
  spec.shape = {n};
  spec.compress = true;
  spec.memory = MemoryType::kDevice;
  return spec;
}

// The local side reuses a device sum's buffer once the engine releases it (device_data.h), so when
// the compensation of a device sum fails after its kernel was queued (here: its norm), the
// backend is synchronised before the error returns; the next step of the tensor works.
TEST(ExecutorDeviceTest, AFailedCompensationOfADeviceSumSynchronisesBeforeItReturns) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  internal::BackendCompression compression(nullptr, FakeDeviceBackends(memory));
  const TensorSpec spec = DeviceSpec("fc", 1000);
  std::mt19937 rng(8);
  const std::vector<float> g = Gradient(rng, 1000);
  const auto sum = FakeDeviceData::Make(0, memory, g);
  double norm = 0.0;
  memory->fail_sum_squares = 1;
  EXPECT_THAT(compression.CompensateFromDevice(spec, *sum, &norm),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("SumSquares failed")));
  EXPECT_GE(memory->synchronized_after_failure, 1);
  ASSERT_OK_AND_ASSIGN(const bool in_place, compression.CompensateFromDevice(spec, *sum, &norm));
  EXPECT_TRUE(in_place);
  EXPECT_GT(norm, 0.0);
}

// A device backend's messages lie in device memory: the engine never gets them as host memory to
// encode or to select the candidate from (it copies the sent one out, and selects θ_c from p).
TEST(ExecutorDeviceTest, ADeviceBackendsMessagesAreNotHandedOutAsHostMemory) {
  auto memory = std::make_shared<FakeDeviceMemory>();
  internal::BackendCompression compression(nullptr, FakeDeviceBackends(memory));
  const TensorSpec spec = DeviceSpec("fc", 1000);
  std::mt19937 rng(9);
  const auto sum = FakeDeviceData::Make(0, memory, Gradient(rng, 1000));
  double norm = 0.0;
  ASSERT_OK_AND_ASSIGN(const bool in_place, compression.CompensateFromDevice(spec, *sum, &norm));
  ASSERT_TRUE(in_place);
  using Level = internal::BackendCompression::Level;
  ASSERT_THAT(compression.Select("fc", Level::kMin, 10.0, nullptr), IsOk());
  EXPECT_THAT(compression.HostMessage("fc", Level::kMin),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(::testing::HasSubstr("'fc'"), ::testing::HasSubstr("cuda"))));
  kernels::Compressed candidate;
  EXPECT_THAT(compression.CandidateFromMin("fc", 40.0, &candidate),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace gravac::daemon

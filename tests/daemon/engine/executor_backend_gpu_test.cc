// The engine's error-feedback top-k on the CUDA compression backend (daemon/engine/
// backend_compression.h): device tensors of two nodes, compressed on CUDA device 0 with their
// residuals in device memory, give every result and residual of the CPU compressor path bit for
// bit over the steps of executor_backend_test.cc, and the norms of the device's SumSquares (the
// CPU twin's order) of g and both levels, selected on the device. Skips without a CUDA device (and in a build
// without CUDA). Label gpu.
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/daemon/engine/executor_pair.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT

TEST(ExecutorBackendGpuTest, DeviceTensorsOnTheCudaBackendMatchTheCpuCompressorPathBitForBit) {
  absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> device =
      kernels::MakeCompressionBackend(MemoryType::kDevice, 0);
  if (!device.ok()) GTEST_SKIP() << "GPU test skipped: " << device.status().message();
  ExpectSameAsTheCpuCompressorPath(MemoryType::kDevice, "cuda", NormOrder::kSumSquares);
}

}  // namespace
}  // namespace gravac::daemon

#include "core/cuda/cuda_status.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"

namespace gravac::kernels::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

cudaError_t Returns(cudaError_t error) { return error; }

constexpr int kMacroLine = __LINE__ + 3;  // the line of the macro below

absl::Status Wrapped(cudaError_t error) {
  GRAVAC_CUDA_RETURN_IF_ERROR(Returns(error));
  return absl::OkStatus();
}

TEST(CudaStatusTest, SuccessIsOk) { EXPECT_THAT(Wrapped(cudaSuccess), IsOk()); }

TEST(CudaStatusTest, KeepsCallTextErrorNameAndFileLine) {
  absl::Status s = Wrapped(cudaErrorInvalidValue);
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("Returns(error) failed"), HasSubstr("cudaErrorInvalidValue"),
                             HasSubstr(absl::StrCat("cuda_status_test.cc:", kMacroLine)))));
}

TEST(CudaStatusTest, MapsCodes) {
  EXPECT_THAT(Wrapped(cudaErrorMemoryAllocation), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Wrapped(cudaErrorNoDevice), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Wrapped(cudaErrorIllegalAddress), StatusIs(absl::StatusCode::kInternal));
}

TEST(CudaStatusTest, DeviceCountAgreesWithRuntime) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  absl::StatusOr<int> devices = DeviceCount();
  if (error != cudaSuccess || count == 0) {
    EXPECT_THAT(devices, StatusIs(absl::StatusCode::kFailedPrecondition));
  } else {
    ASSERT_THAT(devices, IsOk());
    EXPECT_EQ(*devices, count);
  }
}

}  // namespace
}  // namespace gravac::kernels::cuda

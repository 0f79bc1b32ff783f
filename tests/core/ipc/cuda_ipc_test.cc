// CUDA IPC handoff (core/ipc/cuda_ipc.h), the refusals that need no device: a handle that
// cannot be opened fails with an error naming the worker and the field, a range outside the
// allocation is refused before any CUDA call, and host memory is not exported as device memory;
// CudaDeviceAccess::WriteFromDevice copies within a device (skips without one) or, built without
// CUDA, says so. The mapping across two processes is cuda_ipc_map_test.cc.
#include "core/ipc/cuda_ipc.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"

namespace gravac::ipc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

DeviceBufferExport GarbageExport() {
  DeviceBufferExport e;
  std::memset(e.mem_handle, 0x5a, sizeof(e.mem_handle));
  e.base_address = 0x7f0000000000;
  e.allocation_bytes = 1 << 20;
  e.offset = 0;
  e.bytes = 4096;
  e.device = 0;
  return e;
}

TEST(DeviceMappingCacheTest, ForeignHandleFailsNamingWorkerAndField) {
  DeviceMappingCache cache;
  absl::StatusOr<void*> p = cache.Map(3, GarbageExport());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("worker 3"), HasSubstr("device_handle")));
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DeviceMappingCacheTest, RangeOutsideTheAllocationIsRefusedBeforeCuda) {
  DeviceMappingCache cache;
  DeviceBufferExport e = GarbageExport();
  e.offset = e.allocation_bytes - 16;
  e.bytes = 32;
  EXPECT_THAT(cache.Map(1, e), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr("worker 1"), HasSubstr("field bytes"))));
  EXPECT_EQ(cache.opens(), 0);
}

TEST(CudaIpcTest, HostMemoryIsNotExportedAsDevice) {
  std::vector<float> host(1024);
  absl::StatusOr<DeviceBufferExport> e = ExportDeviceBuffer(host.data(), 4096, 0);
  ASSERT_FALSE(e.ok());
  if (CudaIpcAvailable()) {
    EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     AllOf(HasSubstr("field data"), HasSubstr("host memory"))));
  }
}

// The write of a result the engine left in gravacd's device memory into a worker's buffer (here a
// buffer of this process: the copy is the same for an IPC-mapped one).
TEST(CudaDeviceAccessTest, WriteFromDeviceCopiesWithinTheDevice) {
  CudaDeviceAccess access;
  if (!BuiltWithCuda()) {
    float src = 1.0f, dst = 0.0f;
    EXPECT_THAT(access.WriteFromDevice(&dst, &src, sizeof(float), 0, ""),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without CUDA")));
    return;
  }
  if (!CudaIpcAvailable()) GTEST_SKIP() << "no usable CUDA device";
  absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> backend =
      kernels::MakeDeviceBackend(0);
  ASSERT_THAT(backend, IsOk());
  constexpr size_t kCount = 1 << 18;
  auto src = (*backend)->Allocate(kCount * sizeof(float));
  auto dst = (*backend)->Allocate(kCount * sizeof(float));
  ASSERT_THAT(src, IsOk());
  ASSERT_THAT(dst, IsOk());
  std::vector<float> values(kCount);
  std::iota(values.begin(), values.end(), 0.5f);
  ASSERT_THAT((*backend)->CopyFromHost((*src)->data(), values.data(), kCount * sizeof(float)),
              IsOk());
  ASSERT_THAT(access.WriteFromDevice((*dst)->data(), (*src)->data(), kCount * sizeof(float), 0, ""),
              IsOk());
  std::vector<float> got(kCount);
  ASSERT_THAT((*backend)->CopyToHost(got.data(), (*dst)->data(), kCount * sizeof(float)), IsOk());
  EXPECT_EQ(got, values);
}

}  // namespace
}  // namespace gravac::ipc

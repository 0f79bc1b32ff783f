// CUDA IPC handoff (core/ipc/cuda_ipc.h), the refusals that need no device: a handle that
// cannot be opened fails with an error naming the worker and the field, a range outside the
// allocation is refused before any CUDA call, and host memory is not exported as device memory.
// The mapping across two processes is cuda_ipc_map_test.cc.
#include "core/ipc/cuda_ipc.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace gravac::ipc

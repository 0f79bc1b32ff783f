// CUDA IPC mapping across two processes (core/ipc/cuda_ipc.h), on a device: a forked process
// maps buffers this process exports; the cache opens an allocation once, finds a reused block,
// replaces a freed one (new buffer id), and the data written through the mapping is seen here. The
// only test in its binary: the fork must come before this process initialises CUDA. Skips without a
// device.
#include <cuda_runtime_api.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "core/ipc/cuda_ipc.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

using ::testing::HasSubstr;

// Runs in the child: maps every export read from `fd`, writes 7.0f at the first float of the
// buffer through the mapping, and answers with the cache's open count and size.
int MapChild(int fd) {
  if (cudaSetDevice(0) != cudaSuccess) return 2;
  DeviceMappingCache cache;
  DeviceBufferExport e;
  while (read(fd, &e, sizeof(e)) == sizeof(e)) {
    int64_t answer[2] = {-1, -1};
    absl::StatusOr<void*> p = cache.Map(0, e);
    if (p.ok()) {
      float seven = 7.0f;
      if (cudaMemcpy(*p, &seven, sizeof(seven), cudaMemcpyHostToDevice) == cudaSuccess) {
        answer[0] = cache.opens();
        answer[1] = static_cast<int64_t>(cache.size());
      }
    }
    if (write(fd, answer, sizeof(answer)) != sizeof(answer)) return 2;
  }
  return 0;
}

TEST(CudaIpcTest, MappingIsCachedPerAllocationAndReplacedWhenFreed) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = fork();  // before this process touches CUDA
  if (pid == 0) {
    close(sv[0]);
    _exit(MapChild(sv[1]));
  }
  close(sv[1]);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    close(sv[0]);
    waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "no CUDA device";
  }
  auto send = [&](const DeviceBufferExport& e, int64_t* opens, int64_t* size) {
    int64_t answer[2];
    ASSERT_EQ(write(sv[0], &e, sizeof(e)), static_cast<ssize_t>(sizeof(e)));
    ASSERT_EQ(read(sv[0], answer, sizeof(answer)), static_cast<ssize_t>(sizeof(answer)));
    *opens = answer[0];
    *size = answer[1];
  };
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  float* block = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&block), 1 << 20), cudaSuccess);
  int64_t opens = 0, size = 0;
  // Two tensors in one block (as the caching allocator hands out): one open.
  absl::StatusOr<DeviceBufferExport> a = ExportDeviceBuffer(block, 4096, 0);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<DeviceBufferExport> b = ExportDeviceBuffer(block + 4096, 4096, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->base_address, a->base_address);
  EXPECT_EQ(b->offset, 4096 * sizeof(float));
  send(*a, &opens, &size);
  send(*b, &opens, &size);
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(size, 1);
  float got = 0;
  ASSERT_EQ(cudaMemcpy(&got, block + 4096, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 7.0f);
  // Freed and allocated again (often at the same address, with a new handle): a new open, and
  // the stale mapping is gone.
  ASSERT_EQ(cudaFree(block), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&block), 1 << 20), cudaSuccess);
  absl::StatusOr<DeviceBufferExport> c = ExportDeviceBuffer(block, 4096, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  send(*c, &opens, &size);
  EXPECT_EQ(opens, 2);
  EXPECT_NE(c->buffer_id, a->buffer_id);
  // The old allocation's mapping goes when the new one has its address or overlaps it.
  bool overlaps = c->base_address < a->base_address + a->allocation_bytes &&
                  a->base_address < c->base_address + c->allocation_bytes;
  EXPECT_EQ(size, overlaps ? 1 : 2);
  ASSERT_EQ(cudaMemcpy(&got, block, sizeof(got), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, 7.0f);
  // Declared on a device it is not on.
  EXPECT_THAT(ExportDeviceBuffer(block, 4096, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field device")));
  close(sv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cudaFree(block);
}

}  // namespace
}  // namespace gravac::ipc

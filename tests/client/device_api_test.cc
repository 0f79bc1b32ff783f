// gravac_allreduce_device_async (gravac.h) against an in-process WorkerServer (FakeEngine). The
// refusals run everywhere: host memory declared as device memory, a NULL device, and (without a
// device or without CUDA) any device call, each naming the rank, tensor and field. With a CUDA
// device, two workers allreduce device tensors (staged through host memory) and a tensor
// declared on another device than its own is refused.
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gravac/gravac.h"
#include "gtest/gtest.h"
#include "tests/daemon/local/fake_daemon_fixture.h"

#ifdef GRAVAC_TEST_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gravac {
namespace {

using ::gravac::daemon::testing::RunWorkers;
using ::testing::AnyOf;
using ::testing::HasSubstr;

using DeviceApiTest = daemon::testing::FakeDaemonTest;

bool HaveDevice() {
#ifdef GRAVAC_TEST_WITH_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

TEST_F(DeviceApiTest, HostMemoryDeclaredAsDeviceIsRefusedNamingTheField) {
  StartDaemon(1);
  RunWorkers(dir_.socket(), 1, 0, 1, [](int, gravac_context* ctx) {
    std::vector<float> host(64, 1.0f);
    const int64_t shape[] = {64};
    gravac_device dev{0, nullptr};
    gravac_request* req = nullptr;
    EXPECT_EQ(gravac_allreduce_device_async(ctx, "g", host.data(), host.data(), shape, 1,
                                            GRAVAC_FLOAT32, GRAVAC_SUM, nullptr, &dev, &req),
              GRAVAC_ERR_INVALID);
    EXPECT_EQ(req, nullptr);
    const std::string error = gravac_last_error(ctx);
    EXPECT_THAT(error, HasSubstr("rank 0, tensor 'g', field"));
    if (HaveDevice()) {
      EXPECT_THAT(error, HasSubstr("field in: "));
      EXPECT_THAT(error, HasSubstr("is host memory but was declared as memory of CUDA device 0"));
    } else {
      EXPECT_THAT(error, HasSubstr("need libgravac built with CUDA and a usable device"));
    }
    EXPECT_EQ(gravac_allreduce_device_async(ctx, "g", host.data(), host.data(), shape, 1,
                                            GRAVAC_FLOAT32, GRAVAC_SUM, nullptr, nullptr, &req),
              GRAVAC_ERR_INVALID);
    EXPECT_THAT(gravac_last_error(ctx), HasSubstr("tensor 'g': dev is NULL"));
  });
}

#ifdef GRAVAC_TEST_WITH_CUDA
TEST_F(DeviceApiTest, TwoWorkersAllreduceDeviceTensors) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  StartDaemon(2);
  constexpr int64_t kCount = 100003;
  RunWorkers(dir_.socket(), 2, 0, 2, [](int lr, gravac_context* ctx) {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    std::vector<float> host(kCount);
    for (int64_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((i % 13) * (lr + 1));
    void* in = nullptr;
    void* out = nullptr;
    ASSERT_EQ(cudaMalloc(&in, kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out, kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(in, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice,
                              stream),
              cudaSuccess);
    const int64_t shape[] = {kCount};
    gravac_device dev{0, stream};
    for (int step = 0; step < 3; ++step) {
      gravac_request* req = nullptr;
      ASSERT_EQ(gravac_allreduce_device_async(ctx, "w", in, out, shape, 1, GRAVAC_FLOAT32,
                                              GRAVAC_SUM, nullptr, &dev, &req),
                GRAVAC_OK)
          << gravac_last_error(ctx);
      ASSERT_EQ(gravac_wait(req), GRAVAC_OK) << gravac_request_error(req);
      gravac_request_free(req);
      std::vector<float> got(kCount, -1.0f);
      ASSERT_EQ(cudaMemcpyAsync(got.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost,
                                stream),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      for (int64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(got[i], static_cast<float>((i % 13) * 3)) << "element " << i;
      }
    }
    // Declared on a device it does not live on.
    gravac_device other{1, stream};
    gravac_request* req = nullptr;
    EXPECT_EQ(gravac_allreduce_device_async(ctx, "w", in, out, shape, 1, GRAVAC_FLOAT32,
                                            GRAVAC_SUM, nullptr, &other, &req),
              GRAVAC_ERR_INVALID);
    EXPECT_THAT(gravac_last_error(ctx),
                AnyOf(HasSubstr("field in: "), HasSubstr("field device")));
    cudaFree(in);
    cudaFree(out);
    cudaStreamDestroy(stream);
  });
}
#endif

}  // namespace
}  // namespace gravac

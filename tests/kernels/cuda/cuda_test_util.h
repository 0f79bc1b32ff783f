// Test helpers for the CUDA kernel tests: a fixture that skips without a usable device and owns a
// stream and a Workspace, device upload/download, bitwise comparison and the input generators
// shared with the CPU-twin comparisons.
//
// Thread-safety: test-only, single-threaded.
#ifndef GRAVAC_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_
#define GRAVAC_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda::testing {

// Skips the test (from SetUp) when cudaGetDeviceCount reports no device or fails.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> devices = DeviceCount();
    if (!devices.ok()) {
      GTEST_SKIP() << "GPU test skipped: " << devices.status().message();
    }
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    absl::StatusOr<std::unique_ptr<Workspace>> ws = Workspace::Create();
    ASSERT_TRUE(ws.ok()) << ws.status();
    ws_ = *std::move(ws);
  }
  void TearDown() override {
    ws_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  template <typename T>
  DeviceBuffer<T> ToDevice(absl::Span<const T> host) {
    absl::StatusOr<DeviceBuffer<T>> buffer = DeviceBuffer<T>::Create(host.size());
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return DeviceBuffer<T>();
    absl::Status s = buffer->Upload(host);
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(buffer);
  }
  template <typename T>
  DeviceBuffer<T> Zeros(int64_t n) {
    return ToDevice<T>(std::vector<T>(n));
  }
  template <typename T>
  std::vector<T> ToHost(const DeviceBuffer<T>& buffer, int64_t n) {
    std::vector<T> host(n);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::Status s = buffer.Download(absl::MakeSpan(host));
    EXPECT_TRUE(s.ok()) << s;
    return host;
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Workspace> ws_;
};

// Bit patterns, so that -0 != +0 and subnormals compare exactly.
inline std::vector<uint32_t> Bits(absl::Span<const float> values) {
  std::vector<uint32_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = std::bit_cast<uint32_t>(values[i]);
  return bits;
}

enum class Dist { kNormal, kTies, kZeros, kNegative, kSubnormal, kSignedZeros };

inline std::string DistName(Dist d) {
  constexpr const char* kNames[] = {"Normal",   "Ties",      "Zeros",
                                    "Negative", "Subnormal", "SignedZeros"};  // by Dist value
  return kNames[static_cast<int>(d)];
}

inline std::vector<float> MakeInput(Dist d, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  const float denorm = std::numeric_limits<float>::denorm_min();
  for (int64_t i = 0; i < n; ++i) {
    switch (d) {
      case Dist::kNormal:
        x[i] = normal(rng);
        break;
      case Dist::kTies:  // few magnitudes, both signs: heavy ties at every threshold
        x[i] = 0.5f * static_cast<float>(small(rng));
        break;
      case Dist::kZeros:
        x[i] = 0.0f;
        break;
      case Dist::kNegative:
        x[i] = -std::fabs(normal(rng)) - 1e-3f;
        break;
      case Dist::kSubnormal:  // subnormal magnitudes, mixed with some normals and zeros
        x[i] = (i % 7 == 0) ? normal(rng) * 1e-30f
                            : denorm * static_cast<float>(small(rng) * 1000 + (i & 15));
        break;
      case Dist::kSignedZeros:  // ±0 and a few ±1: the zero ties span both signs
        x[i] = (i % 97 == 5) ? static_cast<float>(small(rng)) : ((i & 1) ? -0.0f : 0.0f);
        break;
    }
  }
  return x;
}

}  // namespace gravac::kernels::cuda::testing

#endif  // GRAVAC_TESTS_KERNELS_CUDA_CUDA_TEST_UTIL_H_

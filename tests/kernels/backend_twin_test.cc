// The CUDA CompressionBackend against the CPU one (kernels/backend.h): the same TopKStep over
// several steps gives the same messages, residuals and norms bit for bit; SumSquares agrees for
// sizes around its lane count; a NaN in a device gradient is refused naming its index, and the
// device residual is kept. Skips without a CUDA device (and in a build without CUDA). Label gpu.
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_step.h"
#include "kernels/cpu/sum_squares.h"

namespace gravac::kernels {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<float> Gradient(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  // Ties across the top-k boundary and signed zeros, as training gradients have.
  for (int64_t i = 0; i + 7 < n; i += 97) g[i + 7] = g[i];
  if (n > 3) g[3] = -0.0f;
  return g;
}

class BackendTwinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CompressionBackend>> device =
        MakeCompressionBackend(MemoryType::kDevice, 0);
    if (!device.ok()) GTEST_SKIP() << "GPU test skipped: " << device.status().message();
    device_ = *std::move(device);
    ASSERT_OK_AND_ASSIGN(host_, MakeCompressionBackend(MemoryType::kHost, -1));
  }

  // A copy of n elements of backend memory on the host.
  template <typename T>
  std::vector<T> Read(CompressionBackend& b, const T* src, int64_t n) {
    std::vector<T> out(n);
    EXPECT_THAT(b.CopyToHost(out.data(), src, n * sizeof(T)), IsOk());
    return out;
  }

  std::unique_ptr<CompressionBackend> device_;
  std::unique_ptr<CompressionBackend> host_;
};

TEST_F(BackendTwinTest, TopKStepIsTheSameOnBothBackends) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{32769}, int64_t{1} << 20}) {
    ASSERT_OK_AND_ASSIGN(TopKStep on_host, TopKStep::Create(host_.get(), n));
    ASSERT_OK_AND_ASSIGN(TopKStep on_device, TopKStep::Create(device_.get(), n));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> grad, device_->Allocate(n * sizeof(float)));
    const int64_t k_min = n / 100 + 1, k_c = n / 400 + 1;
    for (int s = 0; s < 3; ++s) {
      std::vector<float> g = Gradient(n, 11 * s + static_cast<uint32_t>(n));
      ASSERT_THAT(device_->CopyFromHost(grad->data(), g.data(), n * sizeof(float)), IsOk());
      TopKStep::Norms hn, dn;
      ASSERT_THAT(on_host.Compress(g.data(), k_min, k_c, &hn), IsOk());
      ASSERT_THAT(on_device.Compress(grad->floats(), k_min, k_c, &dn), IsOk()) << n;
      EXPECT_EQ(std::memcmp(&hn, &dn, sizeof(hn)), 0)
          << "n " << n << " step " << s << ": norms " << hn.grad << "/" << dn.grad << " "
          << hn.at_min << "/" << dn.at_min << " " << hn.at_candidate << "/" << dn.at_candidate;
      for (auto level : {TopKStep::Level::kMin, TopKStep::Level::kCandidate}) {
        TopKStep::Message hm =
            level == TopKStep::Level::kMin ? on_host.at_min() : on_host.at_candidate();
        TopKStep::Message dm =
            level == TopKStep::Level::kMin ? on_device.at_min() : on_device.at_candidate();
        ASSERT_EQ(hm.count, dm.count);
        EXPECT_THAT(Read(*device_, dm.indices, dm.count), ElementsAreArray(hm.indices, hm.count));
        std::vector<float> dv = Read(*device_, dm.values, dm.count);
        EXPECT_EQ(std::memcmp(dv.data(), hm.values, hm.count * sizeof(float)), 0);
      }
      auto sent = s == 1 ? TopKStep::Level::kCandidate : TopKStep::Level::kMin;
      ASSERT_THAT(on_host.Commit(sent), IsOk());
      ASSERT_THAT(on_device.Commit(sent), IsOk());
      std::vector<float> dr = Read(*device_, on_device.residual(), n);
      EXPECT_EQ(std::memcmp(dr.data(), on_host.residual(), n * sizeof(float)), 0)
          << "n " << n << " step " << s;
    }
  }
}

TEST_F(BackendTwinTest, SumSquaresIsTheSameBitForBit) {
  for (int64_t n : {int64_t{0}, int64_t{1}, kSumSquaresLanes - 1, kSumSquaresLanes,
                    kSumSquaresLanes + 1, int64_t{5000011}}) {
    std::vector<float> x = Gradient(n, static_cast<uint32_t>(n) + 1);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d, device_->Allocate(n * sizeof(float)));
    ASSERT_THAT(device_->CopyFromHost(d->data(), x.data(), n * sizeof(float)), IsOk());
    ASSERT_OK_AND_ASSIGN(double on_device, device_->SumSquares(d->floats(), n));
    double on_host = cpu::SumSquares(x);
    EXPECT_EQ(std::memcmp(&on_device, &on_host, sizeof(double)), 0)
        << n << ": " << on_device << " vs " << on_host;
  }
}

// The ops of gravacd's local reduce in device memory (daemon/local/device_reduce.h): CopyWithin
// copies bytes exactly (signed zeros kept) and Compensate into its first input accumulates as
// the host sum does.
TEST_F(BackendTwinTest, CopyWithinAndAccumulatingCompensateAreTheSameBitForBit) {
  const int64_t n = 300007;
  std::vector<float> a = Gradient(n, 8), b = Gradient(n, 9);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_a, device_->Allocate(n * 4));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_b, device_->Allocate(n * 4));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_sum, device_->Allocate(n * 4));
  ASSERT_THAT(device_->CopyFromHost(d_a->data(), a.data(), n * 4), IsOk());
  ASSERT_THAT(device_->CopyFromHost(d_b->data(), b.data(), n * 4), IsOk());
  ASSERT_THAT(device_->CopyWithin(d_sum->data(), d_a->data(), n * 4), IsOk());
  std::vector<float> got = Read(*device_, d_sum->floats(), n);
  EXPECT_EQ(std::memcmp(got.data(), a.data(), n * 4), 0);
  ASSERT_THAT(device_->Compensate(d_sum->floats(), d_b->floats(), d_sum->floats(), n), IsOk());
  ASSERT_THAT(host_->Compensate(a.data(), b.data(), a.data(), n), IsOk());
  got = Read(*device_, d_sum->floats(), n);
  EXPECT_EQ(std::memcmp(got.data(), a.data(), n * 4), 0);
}

TEST_F(BackendTwinTest, ScatterAddIsTheSameBitForBit) {
  const int64_t n = 100000, k = 2000;
  std::vector<float> out = Gradient(n, 5), values = Gradient(k, 6);
  std::vector<int32_t> indices(k);
  for (int64_t j = 0; j < k; ++j) indices[j] = static_cast<int32_t>(j * 49 + 3);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_out, device_->Allocate(n * 4));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_idx, device_->Allocate(k * 4));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d_val, device_->Allocate(k * 4));
  ASSERT_THAT(device_->CopyFromHost(d_out->data(), out.data(), n * 4), IsOk());
  ASSERT_THAT(device_->CopyFromHost(d_idx->data(), indices.data(), k * 4), IsOk());
  ASSERT_THAT(device_->CopyFromHost(d_val->data(), values.data(), k * 4), IsOk());
  ASSERT_THAT(device_->ScatterAdd(d_idx->ints(), d_val->floats(), k, 0.25f, d_out->floats(), n),
              IsOk());
  ASSERT_THAT(host_->ScatterAdd(indices.data(), values.data(), k, 0.25f, out.data(), n), IsOk());
  std::vector<float> got = Read(*device_, d_out->floats(), n);
  EXPECT_EQ(std::memcmp(got.data(), out.data(), n * 4), 0);
  // An index outside the tensor is reported by the next synchronising call.
  indices[17] = static_cast<int32_t>(n);
  ASSERT_THAT(device_->CopyFromHost(d_idx->data(), indices.data(), k * 4), IsOk());
  ASSERT_THAT(device_->ScatterAdd(d_idx->ints(), d_val->floats(), k, 1.0f, d_out->floats(), n),
              IsOk());
  EXPECT_THAT(device_->Synchronize(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The division of an average on the device (the engine's device step, executor_device.cc):
// __fdiv_rn, the same bits as kernels::cpu::DivideAll, subnormals, signed zeros and infinities
// included, for the divisors of small and odd world sizes.
TEST_F(BackendTwinTest, DivideAllIsTheSameBitForBit) {
  const int64_t n = 300007;
  std::vector<float> base = Gradient(n, 12);
  base[5] = std::numeric_limits<float>::denorm_min();
  base[6] = -std::numeric_limits<float>::infinity();
  base[7] = std::numeric_limits<float>::max();
  base[8] = 1e-38f;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> d, device_->Allocate(n * 4));
  for (const float divisor : {2.0f, 3.0f, 7.0f, 24.0f, 1000.0f}) {
    std::vector<float> x = base;
    ASSERT_THAT(device_->CopyFromHost(d->data(), x.data(), n * 4), IsOk());
    ASSERT_THAT(device_->DivideAll(d->floats(), n, divisor), IsOk());
    ASSERT_THAT(host_->DivideAll(x.data(), n, divisor), IsOk());
    std::vector<float> got = Read(*device_, d->floats(), n);
    EXPECT_EQ(std::memcmp(got.data(), x.data(), n * 4), 0) << "divisor " << divisor;
  }
}

TEST_F(BackendTwinTest, NonFiniteDeviceGradientIsRefusedNamingTheIndex) {
  const int64_t n = 50000;
  ASSERT_OK_AND_ASSIGN(TopKStep step, TopKStep::Create(device_.get(), n));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackendMemory> grad, device_->Allocate(n * 4));
  std::vector<float> g = Gradient(n, 9);
  ASSERT_THAT(device_->CopyFromHost(grad->data(), g.data(), n * 4), IsOk());
  ASSERT_THAT(step.Compress(grad->floats(), 50, 10, nullptr), IsOk());
  ASSERT_THAT(step.Commit(TopKStep::Level::kMin), IsOk());
  std::vector<float> residual = Read(*device_, step.residual(), n);
  g[31337] = std::numeric_limits<float>::infinity();
  ASSERT_THAT(device_->CopyFromHost(grad->data(), g.data(), n * 4), IsOk());
  EXPECT_THAT(step.Compress(grad->floats(), 50, 10, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("31337")));
  EXPECT_THAT(Read(*device_, step.residual(), n), ElementsAreArray(residual));
}

}  // namespace
}  // namespace gravac::kernels

#include "kernels/cuda/error_feedback.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressed.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/cpu/select.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/select.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace gravac::kernels::cuda {
namespace {

using namespace ::gravac::kernels::cuda::testing;  // NOLINT
using ::testing::HasSubstr;

using CudaErrorFeedbackTest = CudaTest;

TEST_F(CudaErrorFeedbackTest, CompensateMatchesCpuTwinBitForBit) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1009}, int64_t{65537},
                    (int64_t{1} << 24) + 3}) {
    for (Dist dist : {Dist::kNormal, Dist::kSubnormal, Dist::kSignedZeros, Dist::kTies}) {
      SCOPED_TRACE(absl::StrCat(DistName(dist), " n=", n));
      std::vector<float> g = MakeInput(dist, n, 1);
      std::vector<float> e = MakeInput(dist, n, 2);
      std::vector<float> cpu_p(n);
      cpu::CompensateKernel(g, e, absl::MakeSpan(cpu_p));
      DeviceBuffer<float> dg = ToDevice<float>(g);
      DeviceBuffer<float> de = ToDevice<float>(e);
      DeviceBuffer<float> dp = Zeros<float>(n);
      ASSERT_THAT(Compensate(dg.data(), de.data(), dp.data(), n, stream_), IsOk());
      EXPECT_TRUE(Bits(ToHost(dp, n)) == Bits(cpu_p));
      // In place: p aliases the gradient.
      ASSERT_THAT(Compensate(dg.data(), de.data(), dg.data(), n, stream_), IsOk());
      EXPECT_TRUE(Bits(ToHost(dg, n)) == Bits(cpu_p));
    }
  }
}

TEST_F(CudaErrorFeedbackTest, UpdateResidualMatchesCpuTwinBitForBit) {
  // n = 0: nothing to copy or subtract.
  EXPECT_THAT(UpdateResidual(nullptr, 0, nullptr, nullptr, 0, ws_.get(), nullptr, stream_), IsOk());
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1009}, int64_t{65537},
                    (int64_t{1} << 24) + 3}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, KeepCount(n, 100), n}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " k=", k));
      std::vector<float> p = MakeInput(Dist::kNormal, n, 5);
      std::vector<int32_t> idx;
      std::vector<float> sent;
      ASSERT_THAT(cpu::TopK(p, k, nullptr, &idx, &sent), IsOk());
      for (float& v : sent) v = v * 0.75f;  // a lossy "sent" value: the residual keeps a rest
      std::vector<float> cpu_e(n);
      ASSERT_THAT(cpu::UpdateResidualKernel(p, idx, sent, absl::MakeSpan(cpu_e)), IsOk());

      DeviceBuffer<float> dp = ToDevice<float>(p);
      DeviceBuffer<int32_t> di = ToDevice<int32_t>(idx);
      DeviceBuffer<float> ds = ToDevice<float>(sent);
      DeviceBuffer<float> de = Zeros<float>(n);
      ASSERT_THAT(
          UpdateResidual(dp.data(), n, di.data(), ds.data(), k, ws_.get(), de.data(), stream_),
          IsOk());
      ASSERT_THAT(ws_->Synchronize(stream_), IsOk());
      EXPECT_TRUE(Bits(ToHost(de, n)) == Bits(cpu_e));
      // In place: residual aliases p.
      ASSERT_THAT(
          UpdateResidual(dp.data(), n, di.data(), ds.data(), k, ws_.get(), dp.data(), stream_),
          IsOk());
      ASSERT_THAT(ws_->Synchronize(stream_), IsOk());
      EXPECT_TRUE(Bits(ToHost(dp, n)) == Bits(cpu_e));
    }
  }
}

TEST_F(CudaErrorFeedbackTest, OutOfRangeIndexIsReportedBySynchronize) {
  const int64_t n = 100;
  std::vector<float> p = MakeInput(Dist::kNormal, n, 9);
  std::vector<int32_t> idx = {1, 5, 100, -1};
  std::vector<float> sent = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> cpu_e(n);
  EXPECT_THAT(cpu::UpdateResidualKernel(p, idx, sent, absl::MakeSpan(cpu_e)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  DeviceBuffer<float> dp = ToDevice<float>(p);
  DeviceBuffer<int32_t> di = ToDevice<int32_t>(idx);
  DeviceBuffer<float> ds = ToDevice<float>(sent);
  DeviceBuffer<float> de = Zeros<float>(n);
  ASSERT_THAT(UpdateResidual(dp.data(), n, di.data(), ds.data(), 4, ws_.get(), de.data(), stream_),
              IsOk());  // asynchronous: the bad index is only latched
  EXPECT_THAT(ws_->Synchronize(stream_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("indices[2] = 100")));
  EXPECT_THAT(ws_->Synchronize(stream_), IsOk());  // cleared once reported
}

// Several error-feedback steps with GPU top-k against the same loop on the CPU twins: the
// residuals agree bit for bit every step, and Σ sent + e = Σ g holds up to fp32 rounding.
TEST_F(CudaErrorFeedbackTest, StepsMatchCpuAndConserveTheGradient) {
  const int64_t n = 100003;
  const int64_t k = KeepCount(n, 100);
  std::vector<float> cpu_e(n, 0.0f);
  std::vector<double> sum_g(n, 0.0), sum_sent(n, 0.0);
  DeviceBuffer<float> dg = Zeros<float>(n);
  DeviceBuffer<float> de = Zeros<float>(n);
  DeviceBuffer<float> dp = Zeros<float>(n);
  DeviceBuffer<int32_t> di = Zeros<int32_t>(k);
  DeviceBuffer<float> dv = Zeros<float>(k);
  for (int step = 0; step < 8; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    std::vector<float> g = MakeInput(Dist::kNormal, n, 100 + step);
    for (int64_t i = 0; i < n; ++i) sum_g[i] += g[i];
    std::vector<float> cpu_p(n);
    cpu::CompensateKernel(g, cpu_e, absl::MakeSpan(cpu_p));
    std::vector<int32_t> idx;
    std::vector<float> sent;
    ASSERT_THAT(cpu::TopK(cpu_p, k, nullptr, &idx, &sent), IsOk());
    ASSERT_THAT(cpu::UpdateResidualKernel(cpu_p, idx, sent, absl::MakeSpan(cpu_e)), IsOk());
    for (size_t j = 0; j < idx.size(); ++j) sum_sent[idx[j]] += sent[j];

    ASSERT_THAT(dg.Upload(g), IsOk());
    ASSERT_THAT(Compensate(dg.data(), de.data(), dp.data(), n, stream_), IsOk());
    ASSERT_THAT(TopK(dp.data(), n, k, ws_.get(), di.data(), dv.data(), stream_), IsOk());
    ASSERT_THAT(
        UpdateResidual(dp.data(), n, di.data(), dv.data(), k, ws_.get(), de.data(), stream_),
        IsOk());
    ASSERT_THAT(ws_->Synchronize(stream_), IsOk());
    EXPECT_TRUE(ToHost(di, k) == idx);
    EXPECT_TRUE(Bits(ToHost(dv, k)) == Bits(sent));
    ASSERT_TRUE(Bits(ToHost(de, n)) == Bits(cpu_e));
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(sum_sent[i] + cpu_e[i], sum_g[i], 1e-5 * (1.0 + std::fabs(sum_g[i])))
        << "element " << i;
  }
}

TEST(CudaErrorFeedbackArgsTest, RejectsBadArgumentsBeforeTouchingTheDevice) {
  float x[1] = {0.0f};
  int32_t idx[1] = {0};
  EXPECT_THAT(Compensate(x, x, x, -1, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Compensate(nullptr, x, x, 1, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Compensate(nullptr, nullptr, nullptr, 0, nullptr), IsOk());  // nothing to do
  EXPECT_THAT(UpdateResidual(x, 1, idx, x, 1, nullptr, x, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null workspace")));
}

}  // namespace
}  // namespace gravac::kernels::cuda

// CompressionBackend on host memory (kernels/backend.h, kernels/cpu/backend.h) and TopKStep
// (kernels/backend_step.h) over it: the same residual and messages as the CPU engine's
// ErrorFeedback + exact top-k, bit for bit, over several steps (sparse and dense); norms from the
// ordered sum of squares; bad input; the choice of backend by memory type. The CUDA backend
// against this one is backend_twin_test.cc (gpu).
#include "kernels/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend_step.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/cpu/select.h"
#include "kernels/cpu/sum_squares.h"
#include "kernels/multilevel.h"

namespace gravac::kernels {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<float> Gradient(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

TEST(CompressionBackendTest, ChosenByMemoryType) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<CompressionBackend> host,
                       MakeCompressionBackend(MemoryType::kHost, -1));
  EXPECT_EQ(host->name(), "cpu");
  EXPECT_EQ(host->memory_type(), MemoryType::kHost);
  EXPECT_THAT(MakeCompressionBackend(MemoryType::kDevice, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("CUDA device")));
  absl::StatusOr<std::unique_ptr<CompressionBackend>> device =
      MakeCompressionBackend(MemoryType::kDevice, 0);
  if (device.ok()) {
    EXPECT_EQ((*device)->name(), "cuda");
    EXPECT_EQ((*device)->memory_type(), MemoryType::kDevice);
    EXPECT_EQ((*device)->device(), 0);
  } else {
    // No CUDA in the build or no device here: the caller stages through host memory.
    EXPECT_THAT(device, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("no compression backend for device memory")));
  }
}

TEST(CompressionBackendTest, TopKStepMatchesTheCpuEngineBitForBit) {
  constexpr int64_t n = 40000;
  std::unique_ptr<CompressionBackend> backend = cpu::MakeCpuBackend(nullptr);
  ASSERT_OK_AND_ASSIGN(TopKStep step, TopKStep::Create(backend.get(), n));
  cpu::ErrorFeedback reference(n);
  std::vector<float> p(n);
  const int64_t k_min = 400, k_c = 100;
  for (int s = 0; s < 4; ++s) {
    std::vector<float> g = Gradient(n, 7 + s);
    TopKStep::Norms norms;
    ASSERT_THAT(step.Compress(g.data(), k_min, k_c, &norms), IsOk());
    ASSERT_THAT(reference.Compensate(g, absl::MakeSpan(p)), IsOk());
    std::vector<int32_t> idx_min, idx_c;
    std::vector<float> val_min, val_c;
    ASSERT_THAT(cpu::TopK(p, k_min, nullptr, &idx_min, &val_min), IsOk());
    ASSERT_THAT(cpu::TopK(p, k_c, nullptr, &idx_c, &val_c), IsOk());
    TopKStep::Message at_min = step.at_min(), at_c = step.at_candidate();
    ASSERT_EQ(at_min.count, k_min);
    ASSERT_EQ(at_c.count, k_c);
    EXPECT_THAT(std::vector<int32_t>(at_min.indices, at_min.indices + k_min),
                ElementsAreArray(idx_min));
    EXPECT_THAT(std::vector<float>(at_min.values, at_min.values + k_min),
                ElementsAreArray(val_min));
    EXPECT_THAT(std::vector<int32_t>(at_c.indices, at_c.indices + k_c), ElementsAreArray(idx_c));
    EXPECT_EQ(norms.grad, std::sqrt(cpu::SumSquares(g)));
    EXPECT_NEAR(norms.grad, L2Norm(g), 1e-12 * L2Norm(g));
    EXPECT_NEAR(norms.at_min, L2Norm(val_min), 1e-12 * L2Norm(val_min));
    EXPECT_NEAR(norms.at_candidate, L2Norm(val_c), 1e-12 * L2Norm(val_c));
    EXPECT_GT(norms.at_min, norms.at_candidate);
    // Steps 0-2 send θ_min, θ_c, θ_min; step 3 is dense.
    Compressed sent;
    if (s == 3) {
      ASSERT_THAT(step.CommitDense(), IsOk());
      reference.Clear();
    } else {
      bool candidate = s == 1;
      ASSERT_THAT(step.Commit(candidate ? TopKStep::Level::kCandidate : TopKStep::Level::kMin),
                  IsOk());
      sent.dense_size = n;
      sent.indices = candidate ? idx_c : idx_min;
      sent.values = candidate ? val_c : val_min;
      ASSERT_THAT(reference.Update(p, sent), IsOk());
    }
    EXPECT_THAT(std::vector<float>(step.residual(), step.residual() + n),
                ElementsAreArray(reference.residual()))
        << "step " << s;
  }
}

// Compress in parts (Compensate, Select of each level, as the daemon's engine runs it): the same
// messages and residual as Compress, a level selected at any k (larger ones grow the message),
// and no commit of a level that was not selected.
TEST(CompressionBackendTest, TopKStepInPartsMatchesCompress) {
  constexpr int64_t n = 5000;
  std::unique_ptr<CompressionBackend> backend = cpu::MakeCpuBackend(nullptr);
  ASSERT_OK_AND_ASSIGN(TopKStep whole, TopKStep::Create(backend.get(), n));
  ASSERT_OK_AND_ASSIGN(TopKStep parts, TopKStep::Create(backend.get(), n));
  EXPECT_THAT(parts.Select(TopKStep::Level::kMin, 10),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  for (int s = 0; s < 4; ++s) {
    std::vector<float> g = Gradient(n, 50 + s);
    const int64_t k_min = 50, k_c = s == 2 ? 1200 : 10;  // step 2: the candidate slot grows
    ASSERT_THAT(whole.Compress(g.data(), std::max(k_min, k_c), std::min(k_min, k_c), nullptr),
                IsOk());
    ASSERT_THAT(parts.Compensate(g.data()), IsOk());
    EXPECT_THAT(parts.Commit(TopKStep::Level::kCandidate),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    ASSERT_THAT(parts.Select(TopKStep::Level::kCandidate, k_c), IsOk());
    ASSERT_THAT(parts.Select(TopKStep::Level::kMin, k_min), IsOk());
    EXPECT_THAT(parts.Select(TopKStep::Level::kMin, -1),
                StatusIs(absl::StatusCode::kInvalidArgument));
    ASSERT_THAT(parts.Select(TopKStep::Level::kMin, k_min), IsOk());
    // The level whose k is larger in `whole` is its kMin.
    const TopKStep::Message big = k_c > k_min ? parts.at_candidate() : parts.at_min();
    const TopKStep::Message small = k_c > k_min ? parts.at_min() : parts.at_candidate();
    ASSERT_EQ(big.count, whole.at_min().count);
    ASSERT_EQ(small.count, whole.at_candidate().count);
    EXPECT_THAT(std::vector<int32_t>(big.indices, big.indices + big.count),
                ElementsAreArray(whole.at_min().indices, whole.at_min().count));
    EXPECT_THAT(std::vector<float>(small.values, small.values + small.count),
                ElementsAreArray(whole.at_candidate().values, whole.at_candidate().count));
    const bool big_sent = s % 2 == 0;
    ASSERT_THAT(whole.Commit(big_sent ? TopKStep::Level::kMin : TopKStep::Level::kCandidate),
                IsOk());
    const bool sent_is_candidate = (k_c > k_min) == big_sent;
    ASSERT_THAT(
        parts.Commit(sent_is_candidate ? TopKStep::Level::kCandidate : TopKStep::Level::kMin),
        IsOk());
    EXPECT_THAT(std::vector<float>(parts.residual(), parts.residual() + n),
                ElementsAreArray(whole.residual(), n))
        << "step " << s;
    EXPECT_THAT(parts.CommitDense(), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
}

// The fused compensation of the CPU backend: p as Compensate gives it and ‖g‖ as kernels::L2Norm
// sums it (the daemon's statistics), bit for bit; TopKStep passes it through.
TEST(CompressionBackendTest, CompensateWithNormIsCompensateAndL2Norm) {
  std::unique_ptr<CompressionBackend> backend = cpu::MakeCpuBackend(nullptr);
  for (int64_t n : {int64_t{0}, int64_t{3}, int64_t{1001}}) {
    std::vector<float> g = Gradient(n, 5), e = Gradient(n, 6), p(n), want(n);
    ASSERT_OK_AND_ASSIGN(double norm, backend->CompensateWithNorm(g.data(), e.data(), p.data(), n));
    ASSERT_THAT(backend->Compensate(g.data(), e.data(), want.data(), n), IsOk());
    EXPECT_EQ(p, want);
    EXPECT_EQ(norm, L2Norm(g)) << n;
  }
  constexpr int64_t n = 777;
  ASSERT_OK_AND_ASSIGN(TopKStep step, TopKStep::Create(backend.get(), n));
  std::vector<float> g = Gradient(n, 9);
  double norm = -1.0;
  ASSERT_THAT(step.Compensate(g.data(), &norm), IsOk());
  EXPECT_EQ(norm, L2Norm(g));
  EXPECT_THAT(std::vector<float>(step.p(), step.p() + n), ElementsAreArray(g));
  EXPECT_THAT(backend->CompensateWithNorm(g.data(), g.data(), g.data(), -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// DivideAll (the division of an average on a backend) is an element-wise fp32 division,
// kernels::cpu::DivideAll's bits (the CUDA twin is checked in backend_twin_test.cc).
TEST(CompressionBackendTest, DivideAllIsTheFp32DivisionOfEachElement) {
  std::unique_ptr<CompressionBackend> backend = cpu::MakeCpuBackend(nullptr);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1001}}) {
    std::vector<float> x = Gradient(n, 13), want = x;
    for (float& v : want) v = v / 3.0f;
    ASSERT_THAT(backend->DivideAll(x.data(), n, 3.0f), IsOk());
    EXPECT_EQ(x, want) << n;
  }
  float x = 1.0f;
  EXPECT_THAT(backend->DivideAll(&x, -1, 2.0f), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CompressionBackendTest, NonFiniteGradientIsRefusedAndTheResidualKept) {
  constexpr int64_t n = 1000;
  std::unique_ptr<CompressionBackend> backend = cpu::MakeCpuBackend(nullptr);
  ASSERT_OK_AND_ASSIGN(TopKStep step, TopKStep::Create(backend.get(), n));
  std::vector<float> g = Gradient(n, 3);
  ASSERT_THAT(step.Compress(g.data(), 10, 5, nullptr), IsOk());
  ASSERT_THAT(step.Commit(TopKStep::Level::kMin), IsOk());
  std::vector<float> residual(step.residual(), step.residual() + n);
  g[617] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(step.Compress(g.data(), 10, 5, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("617")));
  EXPECT_THAT(step.Commit(TopKStep::Level::kMin), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::vector<float>(step.residual(), step.residual() + n), ElementsAreArray(residual));
  EXPECT_THAT(step.Compress(g.data(), 5, 10, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k_c <= k_min")));
  EXPECT_THAT(
      backend->TopK(g.data(), -1, 1, nullptr, nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("TopK"), HasSubstr("n"))));
}

TEST(SumSquaresTest, OrderedSumAgreesWithTheEngineNorm) {
  EXPECT_EQ(cpu::SumSquares({}), 0.0);
  std::vector<float> small = {3.0f, -4.0f};
  EXPECT_EQ(cpu::SumSquares(small), 25.0);
  for (int64_t n : {int64_t{1}, kSumSquaresLanes - 1, kSumSquaresLanes + 1, int64_t{300001}}) {
    std::vector<float> x = Gradient(n, static_cast<uint32_t>(n));
    double norm = L2Norm(x);
    EXPECT_NEAR(std::sqrt(cpu::SumSquares(x)), norm, 1e-12 * norm) << n;
  }
  std::vector<float> inf = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(cpu::SumSquares(inf)));
}

}  // namespace
}  // namespace gravac::kernels

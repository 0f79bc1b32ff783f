#include "kernels/cpu/error_feedback.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/randomk.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ErrorFeedbackTest, CompensateUpdateClear) {
  ErrorFeedback ef(4);
  EXPECT_EQ(ef.size(), 4);
  EXPECT_THAT(ef.residual(), Each(0.0f));
  std::vector<float> g = {1, -2, 3, -4};
  std::vector<float> p(4);
  ASSERT_THAT(ef.Compensate(g, absl::MakeSpan(p)), IsOk());
  EXPECT_EQ(p, g);
  Compressed sent;  // top-2 of p
  sent.dense_size = 4;
  sent.indices = {2, 3};
  sent.values = {3, -4};
  ASSERT_THAT(ef.Update(p, sent), IsOk());
  EXPECT_THAT(ef.residual(), ElementsAre(1, -2, 0, 0));  // exact zeros where sent
  ASSERT_THAT(ef.Compensate(g, absl::MakeSpan(p)), IsOk());
  EXPECT_THAT(p, ElementsAre(2, -4, 3, -4));
  ef.Clear();
  EXPECT_THAT(ef.residual(), Each(0.0f));
}

TEST(ErrorFeedbackTest, DenseCastLeavesItsRoundingError) {
  ErrorFeedback ef(3);
  std::vector<float> p = {1.0f + std::ldexp(1.0f, -12), 3.14159265f, -7.0f};
  Compressed sent;
  sent.dense = true;
  sent.dense_size = 3;
  sent.value_type = ValueType::kFloat16;
  sent.values = p;
  RoundToValueType(ValueType::kFloat16, absl::MakeSpan(sent.values));
  ASSERT_THAT(ef.Update(p, sent), IsOk());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ef.residual()[i], p[i] - sent.values[i]) << i;
    EXPECT_EQ(ef.residual()[i] + sent.values[i], p[i]) << "the split is exact at " << i;
  }
  EXPECT_EQ(ef.residual()[0], std::ldexp(1.0f, -12));
  EXPECT_EQ(ef.residual()[2], 0.0f);
}

TEST(ErrorFeedbackTest, RejectsMismatchedSizesAndKeepsResidual) {
  ErrorFeedback ef(3);
  std::vector<float> g = {1, 2, 3};
  std::vector<float> p(3);
  ASSERT_THAT(ef.Compensate(g, absl::MakeSpan(p)), IsOk());
  Compressed sent;
  sent.dense_size = 3;
  sent.indices = {0};
  sent.values = {1};
  ASSERT_THAT(ef.Update(p, sent), IsOk());
  std::vector<float> before(ef.residual().begin(), ef.residual().end());

  std::vector<float> short_g = {1, 2};
  EXPECT_THAT(ef.Compensate(short_g, absl::MakeSpan(p)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Compressed other = sent;
  other.dense_size = 4;
  EXPECT_THAT(ef.Update(p, other),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense_size 4")));
  other = sent;
  other.indices = {3};
  EXPECT_THAT(ef.Update(p, other),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 3")));
  other = sent;
  other.values = {1, 2};
  EXPECT_THAT(ef.Update(p, other), StatusIs(absl::StatusCode::kInvalidArgument));
  other.dense = true;
  other.values = {1, 2};
  EXPECT_THAT(ef.Update(p, other), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::vector<float>(ef.residual().begin(), ef.residual().end()), before);
}

TEST(ErrorFeedbackTest, ScratchStepsEqualCompensateAndUpdateBitForBit) {
  // The daemon's copy-free step (CompensateToScratch + CommitScratch / Clear) against the
  // reference (Compensate + Update / Clear): same p, same residual, every step.
  const int64_t n = 1001;  // not a multiple of the norm's four lanes
  ErrorFeedback ref(n), fast(n);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(n) - 1);
  std::vector<float> g(n), p(n);
  for (int step = 0; step < 60; ++step) {
    for (float& x : g) x = dist(rng);
    ASSERT_THAT(ref.Compensate(g, absl::MakeSpan(p)), IsOk());
    double norm = -1.0;
    absl::StatusOr<absl::Span<const float>> q = fast.CompensateToScratch(g, &norm);
    ASSERT_THAT(q.status(), IsOk());
    ASSERT_EQ(std::vector<float>(q->begin(), q->end()), p) << "step " << step;
    long double sq = 0.0L;
    for (float x : g) sq += static_cast<long double>(x) * x;
    EXPECT_NEAR(norm, std::sqrt(static_cast<double>(sq)), 1e-12 * norm) << "step " << step;
    Compressed sent;
    sent.dense_size = n;
    if (step % 7 == 3) {
      ref.Clear();
      fast.Clear();
    } else {
      if (step % 5 == 4) {  // a dense cast: the residual keeps the rounding error
        sent.dense = true;
        sent.value_type = ValueType::kFloat16;
        sent.values = p;
        RoundToValueType(ValueType::kFloat16, absl::MakeSpan(sent.values));
      } else {  // a sparse message of p's values at ascending distinct indices
        std::vector<bool> chosen(n, false);
        for (int j = 0; j < 50; ++j) chosen[pick(rng)] = true;
        for (int64_t i = 0; i < n; ++i) {
          if (!chosen[i]) continue;
          sent.indices.push_back(static_cast<int32_t>(i));
          sent.values.push_back(i % 3 == 0 ? p[i] * 0.5f : p[i]);  // partly sent values too
        }
      }
      ASSERT_THAT(ref.Update(p, sent), IsOk());
      ASSERT_THAT(fast.CommitScratch(sent), IsOk());
    }
    ASSERT_EQ(std::vector<float>(fast.residual().begin(), fast.residual().end()),
              std::vector<float>(ref.residual().begin(), ref.residual().end()))
        << "step " << step;
  }
}

TEST(ErrorFeedbackTest, CommitScratchChecksAndKeepsResidual) {
  ErrorFeedback ef(3);
  Compressed sent;
  sent.dense_size = 3;
  sent.indices = {1};
  sent.values = {2};
  EXPECT_THAT(ef.CommitScratch(sent), StatusIs(absl::StatusCode::kFailedPrecondition));
  std::vector<float> g = {1, 2, 3};
  ASSERT_THAT(ef.CompensateToScratch(g, nullptr).status(), IsOk());
  ASSERT_THAT(ef.CommitScratch(sent), IsOk());
  EXPECT_THAT(ef.residual(), ElementsAre(1, 0, 3));
  EXPECT_THAT(ef.CommitScratch(sent), StatusIs(absl::StatusCode::kFailedPrecondition))
      << "a scratch is committed once";

  absl::StatusOr<absl::Span<const float>> p = ef.CompensateToScratch(g, nullptr);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_THAT(*p, ElementsAre(2, 2, 6));
  Compressed bad = sent;
  bad.indices = {3};
  EXPECT_THAT(ef.CommitScratch(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 3")));
  bad = sent;
  bad.dense_size = 4;
  EXPECT_THAT(ef.CommitScratch(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense_size 4")));
  EXPECT_THAT(ef.residual(), ElementsAre(1, 0, 3)) << "failed commits leave the residual";
  std::vector<float> short_g = {1, 2};
  EXPECT_THAT(ef.CompensateToScratch(short_g, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ef.residual(), ElementsAre(1, 0, 3));
}

TEST(ErrorFeedbackTest, FreeKernelsMatchTheClass) {
  std::vector<float> g = {0.5f, 1.5f, -2.5f, 4.0f, 8.0f};
  std::vector<float> e = {0.25f, 0.0f, 1.0f, -1.0f, 0.125f};
  std::vector<float> p(5);
  CompensateKernel(g, e, absl::MakeSpan(p));
  EXPECT_THAT(p, ElementsAre(0.75f, 1.5f, -1.5f, 3.0f, 8.125f));
  std::vector<int32_t> idx = {1, 4};
  std::vector<float> sent = {1.5f, 8.0f};
  std::vector<float> r(5, 99.0f);
  ASSERT_THAT(UpdateResidualKernel(p, idx, sent, absl::MakeSpan(r)), IsOk());
  EXPECT_THAT(r, ElementsAre(0.75f, 0.0f, -1.5f, 3.0f, 0.125f));
  idx = {1, 5};
  std::vector<float> keep = r;
  EXPECT_THAT(UpdateResidualKernel(p, idx, sent, absl::MakeSpan(r)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 5")));
  EXPECT_EQ(r, keep);
}

TEST(ErrorFeedbackTest, ConservationOverManySteps) {
  // Σ_t sent_t + e_T = Σ_t g_t per element, with randomk messages and a dense step in between.
  const int64_t n = 2000;
  ErrorFeedback ef(n);
  RandomKCompressor c(CompressorOptions{});
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<double> sum_g(n, 0.0), sum_sent(n, 0.0), bound(n, 0.0);
  std::vector<float> g(n), p(n);
  Compressed m;
  for (int step = 0; step < 300; ++step) {
    for (float& x : g) x = dist(rng);
    ASSERT_THAT(ef.Compensate(g, absl::MakeSpan(p)), IsOk());
    for (int64_t i = 0; i < n; ++i) {
      sum_g[i] += g[i];
      bound[i] += std::ldexp(std::fabs(static_cast<double>(p[i])), -24);  // one fp32 rounding
    }
    if (step == 150) {
      for (int64_t i = 0; i < n; ++i) sum_sent[i] += p[i];
      ef.Clear();
      continue;
    }
    ASSERT_THAT(c.Compress(p, 50.0, CompressContext{"w", step, 3}, &m), IsOk());
    for (int64_t j = 0; j < m.count(); ++j) sum_sent[m.indices[j]] += m.values[j];
    ASSERT_THAT(ef.Update(p, m), IsOk());
  }
  for (int64_t i = 0; i < n; ++i) {
    const double lhs = sum_sent[i] + ef.residual()[i];
    ASSERT_NEAR(lhs, sum_g[i], bound[i] + 1e-12) << "element " << i;
  }
}

}  // namespace
}  // namespace gravac::kernels::cpu

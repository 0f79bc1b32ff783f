// Error-feedback conservation (DESIGN.md invariant 2): for every compressor, over many steps of
// random gradients, Σ_t sent_t + e_T = Σ_t g_t per element, where "sent" is what the receiver
// decodes from the wire.
//
// Tolerance, derived rather than tuned: each step computes p = fl(g + e) (one fp32 rounding,
// at most 2^-24·|p|) and e' = fl(p - v) at the sent positions (exact when v is p rounded to the
// value type, else at most 2^-24·|e'|). The sums are kept in double (each addition errs by at
// most 2^-53 of the running magnitude). So per element
//   |Σ sent + e_T − Σ g| <= Σ_t 2^-24 (|p_t| + |e_t|) + Σ_t 2^-52 (|S_sent| + |S_g|),
// and a lost or double-counted element would miss it by O(|g|), many orders of magnitude more.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/multilevel.h"
#include "kernels/wire_format.h"

namespace gravac::kernels {
namespace {

using ::testing::Each;

struct Tensor {
  std::string name;
  int64_t n;
};

class EfConservationTest : public ::testing::TestWithParam<std::tuple<std::string, ValueType>> {};

TEST_P(EfConservationTest, SentPlusResidualEqualsSumOfGradients) {
  const auto& [name, value_type] = GetParam();
  ThreadPool pool(2);
  CompressorOptions options;
  options.value_type = value_type;
  options.pool = &pool;
  ASSERT_OK_AND_ASSIGN(auto compressor, MakeCompressor(name, options));

  const std::vector<Tensor> tensors = {{"conv1.weight", 4097}, {"fc.bias", 10}, {"emb", 30000}};
  const int kSteps = 220;
  const int kDenseStep = 120;  // an uncompressed step: everything is sent, e = 0
  const double kThetas[] = {20.0, 40.0, 160.0, 1000.0};
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);

  for (const Tensor& t : tensors) {
    cpu::ErrorFeedback ef(t.n);
    std::vector<double> sum_g(t.n, 0.0), sum_sent(t.n, 0.0), bound(t.n, 0.0);
    std::vector<float> g(t.n), p(t.n);
    std::vector<uint8_t> wire;
    MultiLevelResult levels;
    Compressed received;
    int64_t total_sent = 0;
    for (int step = 0; step < kSteps; ++step) {
      const float scale = 0.01f + 2.0f * unit(rng);  // gradients change scale step to step
      for (int64_t i = 0; i < t.n; ++i) {
        g[i] = scale * normal(rng) * (i % 97 == 0 ? 30.0f : 1.0f);  // a few heavy elements
      }
      ASSERT_THAT(ef.Compensate(g, absl::MakeSpan(p)), IsOk());
      for (int64_t i = 0; i < t.n; ++i) {
        sum_g[i] += g[i];
        bound[i] += std::ldexp(std::fabs(static_cast<double>(p[i])), -24);
      }
      if (step == kDenseStep) {
        for (int64_t i = 0; i < t.n; ++i) sum_sent[i] += p[i];
        ef.Clear();
        ASSERT_THAT(ef.residual(), Each(0.0f));
        total_sent += t.n;
      } else {
        // Multi-level: θ_min = 10 and a candidate; send one or the other, as the policy would.
        const double theta_c = kThetas[step % 4];
        CompressContext ctx{t.name, step, 77};
        ASSERT_THAT(CompressMultiLevel(*compressor, p, 10.0, theta_c, ctx, &levels), IsOk())
            << t.name << " step " << step;
        const Compressed& sent = step % 3 == 0 ? levels.at_min : levels.at_candidate;
        ASSERT_THAT(Encode(sent, &wire), IsOk()) << t.name << " step " << step;
        ASSERT_THAT(Decode(wire, &received), IsOk()) << t.name << " step " << step;
        ASSERT_EQ(received.values, sent.values);
        ASSERT_EQ(received.indices, sent.indices);
        ASSERT_THAT(ef.Update(p, received), IsOk());
        if (received.dense) {
          for (int64_t i = 0; i < t.n; ++i) sum_sent[i] += received.values[i];
        } else {
          for (int64_t j = 0; j < received.count(); ++j) {
            sum_sent[received.indices[j]] += received.values[j];
          }
        }
        total_sent += received.count();
      }
      for (int64_t i = 0; i < t.n; ++i) {
        bound[i] += std::ldexp(std::fabs(static_cast<double>(ef.residual()[i])), -24) +
                    std::ldexp(std::fabs(sum_sent[i]) + std::fabs(sum_g[i]), -52);
      }
    }
    // Something was held back and something was sent (the test is not vacuous).
    EXPECT_GT(total_sent, 0);
    if (!compressor->is_dense()) {
      EXPECT_LT(total_sent, int64_t{kSteps} * t.n / 2);
    }
    double worst = 0.0;
    for (int64_t i = 0; i < t.n; ++i) {
      const double err = std::fabs(sum_sent[i] + ef.residual()[i] - sum_g[i]);
      ASSERT_LE(err, bound[i]) << name << " " << t.name << " element " << i << ": sent "
                               << sum_sent[i] << " + residual " << ef.residual()[i]
                               << " vs gradients " << sum_g[i];
      worst = std::max(worst, err / bound[i]);
    }
    RecordProperty(t.name + "_worst_error_over_bound", absl::StrFormat("%.3g", worst));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCompressors, EfConservationTest,
                         ::testing::Combine(::testing::ValuesIn(CompressorNames()),
                                            ::testing::Values(ValueType::kFloat32,
                                                              ValueType::kFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == ValueType::kFloat16 ? "_fp16values"
                                                                                  : "_fp32values");
                         });

}  // namespace
}  // namespace gravac::kernels

// The compression gain of a synthetic gradient stream whose sparsity is known (GRAVAC.md, "What a
// credible implementation shows", point 1), measured end to end: real compressors and multi-level
// compression produce N_min and N_c, the policy engine's trackers smooth them, and its gains and
// per-step choice must match what the sparsity predicts.
//
// Stream: L layers of n elements; at every step exactly m entries per layer (fresh random
// positions) are ±a and the rest 0. Top-k at θ keeps k = n/θ entries: when k >= m it keeps all of
// them (gain 1), else k of the m equal magnitudes, so ‖C(g)‖/‖g‖ = sqrt(k/m) per layer and for the
// sum of layer norms. Error feedback is off here (p = g), so the prediction is exact.
#include <cmath>
#include <random>
#include <vector>

#include "controller/policy/gravac_policy.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"
#include "kernels/multilevel.h"

namespace gravac {
namespace {

constexpr int kLayers = 3;
constexpr int64_t kN = 20000;  // elements per layer
constexpr int64_t kM = 1000;   // non-zeros per layer: density 5%

std::vector<float> SparseLayer(std::mt19937& rng, float magnitude) {
  std::vector<float> g(kN, 0.0f);
  std::vector<int64_t> pos(kN);
  for (int64_t i = 0; i < kN; ++i) pos[i] = i;
  for (int64_t i = 0; i < kM; ++i) {  // partial Fisher-Yates: m distinct positions
    std::uniform_int_distribution<int64_t> pick(i, kN - 1);
    std::swap(pos[i], pos[pick(rng)]);
    g[pos[i]] = (rng() & 1) ? magnitude : -magnitude;
  }
  return g;
}

struct Gains {
  double gain_min;
  double gain_c;
  policy::Decision decision;
};

// Runs `steps` steps of the stream at candidate theta_c through topk + the policy engine.
Gains RunStream(double theta_c, int steps) {
  policy::PolicyConfig config;
  config.theta_min = 10;
  config.theta_max = 1000;
  config.window = 25;
  config.alpha = 0.05;
  config.eval_steps = 1000000;  // no search move during the test: θ_c stays what we feed
  auto engine = policy::GravacPolicy::Create(config);
  EXPECT_THAT(engine, IsOk());
  kernels::CompressorOptions options;
  auto topk = kernels::MakeCompressor("topk", options);
  EXPECT_THAT(topk, IsOk());
  std::mt19937 rng(7);
  policy::Decision decision;
  for (int step = 0; step < steps; ++step) {
    double n_g = 0, n_min = 0, n_c = 0;
    for (int layer = 0; layer < kLayers; ++layer) {
      std::vector<float> g = SparseLayer(rng, 0.5f + layer);
      kernels::MultiLevelResult r;
      kernels::CompressContext ctx{"layer", step, 1};
      EXPECT_THAT(kernels::CompressMultiLevel(**topk, g, config.theta_min, theta_c, ctx, &r),
                  IsOk());
      n_g += kernels::L2Norm(g);
      n_min += r.norm_min;
      n_c += r.norm_candidate;
    }
    policy::StepStats stats;
    stats.step = step;
    stats.theta_used = config.theta_min;
    // The engine's own θ_c stays θ_min (no period ends), so feed N_c as θ_min's: the candidate
    // tracker then holds exactly the candidate norms computed above.
    stats.theta_candidate = config.theta_min;
    stats.n_g = n_g;
    stats.n_min = n_min;
    stats.n_c = n_c;
    stats.step_seconds = 0.1;
    stats.samples = 32;
    auto d = engine->Observe(stats);
    EXPECT_THAT(d, IsOk());
    decision = *d;
  }
  return {decision.gain_min, decision.gain_c, decision};
}

TEST(GainSynthetic, TrackersReadZeroUntilTheWindowIsFull) {
  Gains g = RunStream(/*theta_c=*/40, /*steps=*/24);
  EXPECT_EQ(g.gain_min, 0.0);
  EXPECT_EQ(g.gain_c, 0.0);
  EXPECT_EQ(g.decision.theta, 10.0);  // warm-up uses θ_min
}

TEST(GainSynthetic, GainMatchesKnownSparsity) {
  // θ_min = 10 keeps 2000 >= 1000 non-zeros: everything, gain 1.
  // θ_c = 40 keeps 500 of 1000 equal magnitudes: sqrt(1/2) ≈ 0.7071 (< ε = 0.75).
  Gains g40 = RunStream(40, 30);
  EXPECT_NEAR(g40.gain_min, 1.0, 1e-9);
  EXPECT_NEAR(g40.gain_c, std::sqrt(500.0 / 1000.0), 1e-6);
  // gain_c < ε but gain_min >= ε: the per-step choice is θ_min.
  EXPECT_EQ(g40.decision.theta, 10.0);

  // θ_c = 20 keeps exactly 1000 = m: gain 1, above ε.
  Gains g20 = RunStream(20, 30);
  EXPECT_NEAR(g20.gain_c, 1.0, 1e-9);

  // θ_c = 100 keeps 200 of 1000: sqrt(0.2).
  Gains g100 = RunStream(100, 30);
  EXPECT_NEAR(g100.gain_c, std::sqrt(0.2), 1e-6);
}

}  // namespace
}  // namespace gravac

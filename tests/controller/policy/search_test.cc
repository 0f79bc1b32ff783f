// The GraVAC search on synthetic jobs whose throughput and gain curves are known, so the θ_c
// trajectory and the stopping point can be derived by hand.
//
// The job follows the engine's decisions (optionally `delay` steps late, as daemons adopting a
// decision do) and reports N_g = 100, N_min = 100·gain(θ_min), N_c = 100·gain(θ_c it used),
// step time seconds(θ_used) and 256 samples. Config: θ_min = 10, W = 25, T_eval = 50, ε = 0.75,
// ω = 0.05, so period p ends after observation 50p (step 50p − 1) and a candidate is used on the
// last 25 steps of its period.
//
// Main curve: gain(θ) = 1 − 0.02·log2(θ/10) (falling), seconds(θ) = 0.1 + 1/θ (throughput
// rising and saturating). The CT value per θ is v(θ) = 256/seconds(θ) · gain(θ):
//   θ:    10      20      40      80      160     100     1000
//   v:  1280.0  1672.5  1966.1  2139.0  2216.7  2172.7  2197.9
// Geometric: gaps (v1−v2)/v2 after each period: {10} alone; 20 vs 10: 30.7%; 40 vs 20: 17.6%;
//   80 vs 40: 8.8%; 160 vs 80: 3.6% < 5% → stop, θ_c = max(160, 80) = 160.
// Exponential: {10} alone; 100 vs 10: 69.7%; 1000 vs 100: 1.2% < 5% → stop, θ_c = 1000.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "controller/policy/gravac_policy.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using ::testing::ElementsAre;

constexpr double kDense = 1.0;
constexpr double kSamples = 256.0;

double MainGain(double theta) { return 1.0 - 0.02 * std::log2(theta / 10.0); }
double MainSeconds(double theta) { return 0.1 + 1.0 / theta; }
double MainValue(double theta) { return kSamples / MainSeconds(theta) * MainGain(theta); }

PolicyConfig SearchConfig(ScalingKind scaling) {
  PolicyConfig c;
  c.scaling = scaling;
  c.window = 25;
  c.alpha = 0.05;
  c.eval_steps = 50;
  return c;
}

struct Curve {
  std::function<double(double theta)> gain = MainGain;
  // Step time for (step, θ_used); θ_used = 1 is dense.
  std::function<double(int64_t step, double theta)> seconds = [](int64_t, double theta) {
    return MainSeconds(theta);
  };
  // Steps the job sends dense regardless of the decision (e.g. θ too small to save bytes).
  std::function<bool(int64_t step)> force_dense = [](int64_t) { return false; };
};

class SyntheticJob {
 public:
  SyntheticJob(PolicyConfig config, Curve curve, int delay = 0)
      : policy_(GravacPolicy::Create(config).value()), curve_(std::move(curve)), delay_(delay) {}

  // Runs `steps` more steps; returns false (after a test failure) if Observe fails.
  bool Run(int steps) {
    for (int i = 0; i < steps; ++i) {
      const int64_t step = static_cast<int64_t>(decisions_.size());
      // The decision returned after step s − 1 − delay is in force at step s.
      const int64_t source = step - 1 - delay_;
      const Decision& in_force = source >= 0 ? decisions_[source] : initial_;
      StepStats s;
      s.step = step;
      s.theta_used = curve_.force_dense(step) ? kDense : in_force.theta;
      s.theta_candidate = in_force.theta_candidate;
      s.n_g = 100.0;
      s.n_min = 100.0 * curve_.gain(policy_.config().theta_min);
      s.n_c = 100.0 * curve_.gain(s.theta_candidate);
      s.step_seconds = curve_.seconds(step, s.theta_used);
      s.samples = static_cast<int64_t>(kSamples);
      absl::StatusOr<Decision> d = policy_.Observe(s);
      EXPECT_THAT(d, IsOk());
      if (!d.ok()) return false;
      decisions_.push_back(*d);
      used_.push_back(s.theta_used);
    }
    return true;
  }
  // Runs until the search is done (or max_steps); returns the number of steps run.
  int64_t RunUntilDone(int max_steps) {
    while (policy_.current().searching && static_cast<int>(decisions_.size()) < max_steps) {
      if (!Run(1)) break;
    }
    return static_cast<int64_t>(decisions_.size());
  }

  const GravacPolicy& policy() const { return policy_; }
  // decisions()[s] is the decision returned after observing step s.
  const std::vector<Decision>& decisions() const { return decisions_; }
  const std::vector<double>& used() const { return used_; }

 private:
  GravacPolicy policy_;
  Decision initial_ = policy_.current();
  Curve curve_;
  int delay_;
  std::vector<Decision> decisions_;
  std::vector<double> used_;
};

double CtMean(const GravacPolicy& p, double theta) {
  const ThroughputTable::Entry* e = p.throughput_table().Find(theta);
  return e == nullptr ? -1.0 : e->mean();
}

TEST(SearchTest, GeometricTrajectoryAndStop) {
  SyntheticJob job(SearchConfig(ScalingKind::kGeometric), Curve{});
  ASSERT_EQ(job.RunUntilDone(10000), 250);  // stops at the end of the 5th period
  const GravacPolicy& p = job.policy();
  // θ accumulates geometrically, one step per period; it never jumps to θ_max.
  EXPECT_THAT(p.candidate_history(),
              ElementsAre(CandidateChange{0, 10}, CandidateChange{50, 20}, CandidateChange{100, 40},
                          CandidateChange{150, 80}, CandidateChange{200, 160}));
  const Decision& d = p.current();
  EXPECT_FALSE(d.searching);
  EXPECT_EQ(d.phase, Phase::kDone);
  EXPECT_EQ(d.theta_candidate, 160.0);
  EXPECT_EQ(d.theta, 160.0);  // 160 kept its tracker: still in use, guarded by ε
  EXPECT_EQ(d.first_step, 250);
  for (double theta : {10.0, 20.0, 40.0, 80.0, 160.0}) {
    EXPECT_NEAR(CtMean(p, theta), MainValue(theta), 1e-9 * MainValue(theta)) << theta;
  }
  // Each candidate was used on exactly the last 25 steps of its period.
  for (int period = 1; period <= 4; ++period) {
    const double theta = 10.0 * std::pow(2.0, period);
    for (int s = 50 * period; s < 50 * period + 50; ++s) {
      EXPECT_EQ(job.used()[s], s < 50 * period + 25 ? 10.0 : theta) << "step " << s;
    }
  }
  EXPECT_EQ(p.throughput_table().Find(20.0)->samples, 25);
  // After the stop nothing moves: θ_c stays 160 and 160 keeps being used.
  ASSERT_TRUE(job.Run(200));
  EXPECT_EQ(p.candidate_history().size(), 5u);
  EXPECT_EQ(p.current().theta, 160.0);
  EXPECT_EQ(p.current().epoch, d.epoch);
}

TEST(SearchTest, ExponentialTrajectoryAndStop) {
  SyntheticJob job(SearchConfig(ScalingKind::kExponential), Curve{});
  ASSERT_EQ(job.RunUntilDone(10000), 150);
  const GravacPolicy& p = job.policy();
  EXPECT_THAT(p.candidate_history(), ElementsAre(CandidateChange{0, 10}, CandidateChange{50, 100},
                                                 CandidateChange{100, 1000}));
  EXPECT_EQ(p.current().phase, Phase::kDone);
  EXPECT_EQ(p.current().theta_candidate, 1000.0);
  EXPECT_EQ(p.current().theta, 1000.0);
  EXPECT_NEAR(CtMean(p, 1000.0), MainValue(1000.0), 1e-6);
}

// Throughput keeps rising up to θ_max: the search ends when θ_max's period has been measured.
TEST(SearchTest, StopsAtThetaMaxWhenStillImproving) {
  PolicyConfig c = SearchConfig(ScalingKind::kGeometric);
  c.theta_max = 80;
  Curve curve;
  curve.gain = [](double) { return 1.0; };
  // v: 233, 427, 731, 1138: every step more than ω better than the last.
  curve.seconds = [](int64_t, double theta) { return 0.1 + 10.0 / theta; };
  SyntheticJob job(c, curve);
  ASSERT_EQ(job.RunUntilDone(10000), 200);
  EXPECT_THAT(job.policy().candidate_history(),
              ElementsAre(CandidateChange{0, 10}, CandidateChange{50, 20}, CandidateChange{100, 40},
                          CandidateChange{150, 80}));
  EXPECT_EQ(job.policy().current().theta_candidate, 80.0);
  EXPECT_EQ(job.policy().current().phase, Phase::kDone);
}

// θ_min = θ_max: the only candidate is measured for one period and kept.
TEST(SearchTest, SingleThetaStopsAfterFirstPeriod) {
  PolicyConfig c = SearchConfig(ScalingKind::kGeometric);
  c.theta_max = 10;
  SyntheticJob job(c, Curve{});
  ASSERT_EQ(job.RunUntilDone(10000), 50);
  EXPECT_THAT(job.policy().candidate_history(), ElementsAre(CandidateChange{0, 10}));
  EXPECT_EQ(job.policy().current().phase, Phase::kDone);
  EXPECT_EQ(job.policy().current().theta, 10.0);
}

// θ_max turns out worse than an earlier θ by more than ω: the search settles on the best measured
// θ, and that θ's tracker refills before it is used again.
TEST(SearchTest, ExhaustedSearchSettlesOnBestMeasured) {
  PolicyConfig c = SearchConfig(ScalingKind::kGeometric);
  c.theta_max = 80;
  Curve curve;
  curve.gain = [](double) { return 1.0; };
  const std::map<double, double> seconds = {{10, 1.0}, {20, 0.5}, {40, 0.25}, {80, 0.4}};
  curve.seconds = [seconds](int64_t, double theta) { return seconds.at(theta); };
  SyntheticJob job(c, curve);
  ASSERT_EQ(job.RunUntilDone(10000), 200);
  const GravacPolicy& p = job.policy();
  // v: 256, 512, 1024, 640. After 80's period: 40 vs 80 differ by 60% > ω, nothing left to try.
  EXPECT_THAT(p.candidate_history(),
              ElementsAre(CandidateChange{0, 10}, CandidateChange{50, 20}, CandidateChange{100, 40},
                          CandidateChange{150, 80}, CandidateChange{200, 40}));
  EXPECT_EQ(p.current().theta_candidate, 40.0);
  EXPECT_EQ(p.current().theta, 10.0);  // 40's tracker restarted
  ASSERT_TRUE(job.Run(25));
  EXPECT_EQ(p.current().theta, 40.0);
  EXPECT_EQ(p.current().first_step, 225);
}

// Reference bug: dense could win the search. Dense steps at an enormous throughput are recorded
// in CT but the search is unchanged: same trajectory, same compressed stop.
TEST(SearchTest, DenseNeverWinsTheSearch) {
  Curve curve;
  curve.force_dense = [](int64_t step) { return step % 7 == 3; };
  curve.seconds = [](int64_t, double theta) { return theta == 1.0 ? 0.001 : MainSeconds(theta); };
  SyntheticJob job(SearchConfig(ScalingKind::kGeometric), curve);
  ASSERT_EQ(job.RunUntilDone(10000), 250);
  const GravacPolicy& p = job.policy();
  ASSERT_NE(p.throughput_table().Find(kDense), nullptr);
  EXPECT_NEAR(CtMean(p, kDense), 256000.0, 1e-6);  // far above any compressed θ
  EXPECT_EQ(p.current().phase, Phase::kDone);
  EXPECT_EQ(p.current().theta_candidate, 160.0);
  EXPECT_EQ(p.candidate_history().back(), (CandidateChange{200, 160}));
  for (const Decision& d : job.decisions()) EXPECT_GE(d.theta_candidate, 10.0);
}

// Reference bug: each CT entry was one noisy step. The last step of θ = 20's period stalls so
// that, alone, it would look within ω of θ_min (1300 vs 1280: 1.6%) and stop the search; the
// period mean (1657.6, 29.5% above) keeps it going.
TEST(SearchTest, PeriodMeanNotLastStepDecides) {
  Curve curve;
  const double stall = kSamples * MainGain(20.0) / 1300.0;
  curve.seconds = [stall](int64_t step, double theta) {
    return step == 99 ? stall : MainSeconds(theta);
  };
  SyntheticJob job(SearchConfig(ScalingKind::kGeometric), curve);
  ASSERT_TRUE(job.Run(101));
  const GravacPolicy& p = job.policy();
  ASSERT_EQ(job.used()[99], 20.0);
  EXPECT_NEAR(CtMean(p, 20.0), (24 * MainValue(20.0) + 1300.0) / 25, 1e-6);
  EXPECT_TRUE(p.current().searching);
  EXPECT_EQ(p.current().theta_candidate, 40.0);
}

// Daemons adopting every decision 3 steps late: the late steps at an old candidate neither feed
// the new candidate's tracker nor count towards any CT entry, and the search result is the same.
TEST(SearchTest, LateAdoptionGivesTheSameSearch) {
  SyntheticJob job(SearchConfig(ScalingKind::kGeometric), Curve{}, /*delay=*/3);
  ASSERT_EQ(job.RunUntilDone(10000), 250);
  const GravacPolicy& p = job.policy();
  EXPECT_EQ(p.current().theta_candidate, 160.0);
  EXPECT_EQ(p.candidate_history().size(), 5u);
  // θ_c = 20 from step 50; its N_c arrives from step 53; tracker full after step 77; θ = 20 is
  // decided for step 78 and used from step 81 to 102, but steps 100..102 come after θ_c moved
  // to 40 and add nothing.
  EXPECT_EQ(job.used()[80], 10.0);
  EXPECT_EQ(job.used()[81], 20.0);
  EXPECT_EQ(job.used()[102], 20.0);
  EXPECT_EQ(p.throughput_table().Find(20.0)->samples, 19);
  EXPECT_NEAR(CtMean(p, 20.0), MainValue(20.0), 1e-6);
}

// After the search θ_c stays fixed, but ε still guards every step.
TEST(SearchTest, EpsilonStillGuardsAfterStop) {
  bool degraded = false;
  Curve curve;
  curve.gain = [&degraded](double theta) {
    return degraded && theta == 160.0 ? 0.5 : MainGain(theta);
  };
  SyntheticJob job(SearchConfig(ScalingKind::kGeometric), curve);
  ASSERT_EQ(job.RunUntilDone(10000), 250);
  ASSERT_EQ(job.policy().current().theta, 160.0);
  degraded = true;
  ASSERT_TRUE(job.Run(60));
  const GravacPolicy& p = job.policy();
  EXPECT_EQ(p.current().theta, 10.0);  // gain_c < ε, gain_min = 1 ≥ ε
  EXPECT_EQ(p.current().theta_candidate, 160.0);
  EXPECT_EQ(p.current().phase, Phase::kDone);
  degraded = false;
  ASSERT_TRUE(job.Run(60));
  EXPECT_EQ(p.current().theta, 160.0);
  EXPECT_EQ(p.candidate_history().size(), 5u);  // θ_c never moved
}

}  // namespace
}  // namespace gravac::policy

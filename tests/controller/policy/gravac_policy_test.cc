// Per-step behaviour of GravacPolicy: validation, warm-up, the per-step choice in each branch,
// epochs, candidate-norm attribution and determinism. The search itself is in search_test.cc.
#include "controller/policy/gravac_policy.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using ::testing::HasSubstr;

constexpr double kDense = 1.0;

// W = 4, T_eval = 20: the first boundary (θ_c 10 → 20) is after observation 20 (step 19); the
// new candidate's tracker is full again after observation 24 (step 23). No dwell: the paper's
// per-step choice (the dwell has its own tests below).
PolicyConfig SmallConfig(double alpha = 0.05, int min_dwell = 0) {
  PolicyConfig c;
  c.window = 4;
  c.alpha = alpha;
  c.eval_steps = 20;
  c.min_dwell = min_dwell;
  return c;
}

// Feeds steps 0, 1, 2, ... whose θ_used and θ_c follow the engine's current decision, with
// N_g = 4 and the given gains for N_min and N_c.
class Driver {
 public:
  explicit Driver(PolicyConfig config) : policy_(GravacPolicy::Create(config).value()) {}

  absl::StatusOr<Decision> Step(double gain_min, double gain_c, double seconds = 0.5) {
    StepStats s;
    s.step = next_step_++;
    s.theta_used = policy_.current().theta;
    s.theta_candidate = policy_.current().theta_candidate;
    s.n_g = 4.0;
    s.n_min = 4.0 * gain_min;
    s.n_c = 4.0 * gain_c;
    s.step_seconds = seconds;
    s.samples = 64;
    return policy_.Observe(s);
  }
  Decision StepOk(double gain_min, double gain_c) {
    absl::StatusOr<Decision> d = Step(gain_min, gain_c);
    EXPECT_THAT(d, IsOk());
    return d.ok() ? *d : Decision{};
  }
  GravacPolicy& policy() { return policy_; }
  int64_t next_step() const { return next_step_; }

 private:
  GravacPolicy policy_;
  int64_t next_step_ = 0;
};

StepStats ValidStats(int64_t step) {
  StepStats s;
  s.step = step;
  s.theta_used = 10.0;
  s.theta_candidate = 10.0;
  s.n_g = 4.0;
  s.n_min = 3.6;
  s.n_c = 3.6;
  s.step_seconds = 0.25;
  s.samples = 256;
  return s;
}

TEST(GravacPolicyTest, CreateRejectsBadConfig) {
  PolicyConfig c;
  c.epsilon = -1.0;
  EXPECT_THAT(GravacPolicy::Create(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
}

TEST(GravacPolicyTest, InitialDecisionIsThetaMinWarmup) {
  ASSERT_OK_AND_ASSIGN(GravacPolicy p, GravacPolicy::Create(PolicyConfig{}));
  const Decision& d = p.current();
  EXPECT_EQ(d.epoch, 0);
  EXPECT_EQ(d.first_step, 0);
  EXPECT_EQ(d.theta, 10.0);
  EXPECT_EQ(d.theta_candidate, 10.0);
  EXPECT_TRUE(d.searching);
  EXPECT_EQ(d.phase, Phase::kWarmup);
  EXPECT_TRUE(p.candidate_history().empty());
  EXPECT_EQ(p.last_step(), -1);
}

TEST(GravacPolicyTest, RejectsBadStatsAndKeepsState) {
  ASSERT_OK_AND_ASSIGN(GravacPolicy p, GravacPolicy::Create(SmallConfig()));
  ASSERT_THAT(p.Observe(ValidStats(5)), IsOk());
  const Decision before = p.current();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Bad {
    StepStats stats;
    const char* message;
  };
  std::vector<Bad> bad;
  auto with = [](auto mutate) {
    StepStats s = ValidStats(6);
    mutate(s);
    return s;
  };
  bad.push_back({ValidStats(5), "duplicate or out of order"});
  bad.push_back({ValidStats(4), "duplicate or out of order"});
  bad.push_back({with([](StepStats& s) { s.step = -1; }), "duplicate or out of order"});
  bad.push_back({with([&](StepStats& s) { s.n_g = nan; }), "n_g = nan"});
  bad.push_back({with([](StepStats& s) { s.n_min = -1.0; }), "n_min = -1"});
  bad.push_back({with([&](StepStats& s) { s.n_c = inf; }), "n_c = inf"});
  bad.push_back({with([](StepStats& s) { s.step_seconds = 0.0; }), "step_seconds = 0"});
  bad.push_back({with([&](StepStats& s) { s.step_seconds = inf; }), "step_seconds = inf"});
  bad.push_back({with([](StepStats& s) { s.samples = 0; }), "samples = 0"});
  bad.push_back({with([](StepStats& s) { s.theta_used = 0.5; }), "theta_used = 0.5"});
  bad.push_back({with([](StepStats& s) { s.theta_used = 5.0; }), "theta_used = 5"});
  bad.push_back({with([](StepStats& s) { s.theta_used = 20000.0; }), "theta_used = 20000"});
  bad.push_back({with([&](StepStats& s) { s.theta_used = nan; }), "theta_used = nan"});
  bad.push_back({with([](StepStats& s) { s.theta_candidate = 1.0; }), "theta_candidate = 1"});
  bad.push_back(
      {with([](StepStats& s) { s.theta_candidate = 20000.0; }), "theta_candidate = 20000"});
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.message);
    EXPECT_THAT(p.Observe(b.stats),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(b.message)));
    EXPECT_EQ(p.current(), before);
    EXPECT_EQ(p.observed_steps(), 1);
    EXPECT_EQ(p.last_step(), 5);
  }
  // The messages name the step.
  EXPECT_THAT(p.Observe(with([](StepStats& s) { s.samples = -3; })),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step 6")));
  // Gaps in the step index are accepted; dense is a valid θ_used.
  StepStats dense = ValidStats(9);
  dense.theta_used = kDense;
  EXPECT_THAT(p.Observe(dense), IsOk());
  EXPECT_EQ(p.observed_steps(), 2);
  EXPECT_EQ(p.last_step(), 9);
}

TEST(GravacPolicyTest, WarmupUsesThetaMinUntilWSteps) {
  Driver drv(SmallConfig());
  for (int i = 0; i < 3; ++i) {
    const Decision d = drv.StepOk(0.1, 0.1);  // gains that would mean dense once measured
    EXPECT_EQ(d.theta, 10.0);
    EXPECT_EQ(d.phase, Phase::kWarmup);
    EXPECT_EQ(d.gain_min, 0.0);  // undefined until the trackers are full
    EXPECT_EQ(d.epoch, 0);
  }
  const Decision d = drv.StepOk(0.1, 0.1);  // the W-th step: trackers full
  EXPECT_EQ(d.phase, Phase::kSearching);
  EXPECT_NEAR(d.gain_min, 0.1, 1e-12);
  EXPECT_EQ(d.theta, kDense);
  EXPECT_EQ(d.epoch, 1);
  EXPECT_EQ(d.first_step, 4);
}

// Reference bug: while θ_c = θ_min after warm-up nothing was sent. The decision is θ_min.
TEST(GravacPolicyTest, CandidateEqualToThetaMinIsSentAtThetaMin) {
  Driver drv(SmallConfig());
  Decision d;
  for (int i = 0; i < 10; ++i) d = drv.StepOk(0.9, 0.9);
  EXPECT_EQ(d.theta_candidate, 10.0);
  EXPECT_EQ(d.theta, 10.0);
  EXPECT_EQ(d.phase, Phase::kSearching);
}

// Runs a fresh engine through the first boundary with constant gains, up to and including the
// step where the new candidate's tracker becomes full; returns the decisions of steps 19..23.
std::vector<Decision> ThroughFirstBoundary(Driver& drv, double gain_min, double gain_c) {
  std::vector<Decision> out;
  for (int i = 0; i < 24; ++i) {
    const Decision d = drv.StepOk(gain_min, gain_c);
    if (i >= 19) out.push_back(d);
  }
  return out;
}

TEST(GravacPolicyTest, NewCandidateWaitsForItsTrackerThenWins) {
  Driver drv(SmallConfig());
  const std::vector<Decision> d = ThroughFirstBoundary(drv, 0.9, 0.8);
  // Step 19 ends the first period: θ_c doubles, its tracker restarts, θ_min meanwhile.
  EXPECT_EQ(d[0].theta_candidate, 20.0);
  EXPECT_EQ(d[0].theta, 10.0);
  EXPECT_EQ(d[0].first_step, 20);
  EXPECT_EQ(d[0].gain_c, 0.0);
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(d[i].theta, 10.0) << "step " << 19 + i;
  // Step 23: 4 candidate samples (steps 20..23): gain_c = 0.8 >= ε.
  EXPECT_EQ(d[4].theta, 20.0);
  EXPECT_NEAR(d[4].gain_c, 0.8, 1e-12);
  EXPECT_EQ(d[4].first_step, 24);
  EXPECT_EQ(d[4].epoch, d[3].epoch + 1);
}

// Reference bug: the candidate's gain came from the θ_min tensors. Here θ_min keeps nearly all of
// the gradient but the candidate does not: the candidate must not be chosen.
TEST(GravacPolicyTest, CandidateGainComesFromCandidateNorms) {
  Driver drv(SmallConfig());
  const Decision d = ThroughFirstBoundary(drv, 0.95, 0.5).back();
  EXPECT_NEAR(d.gain_min, 0.95, 1e-12);
  EXPECT_NEAR(d.gain_c, 0.5, 1e-12);
  EXPECT_EQ(d.theta_candidate, 20.0);
  EXPECT_EQ(d.theta, 10.0);
}

TEST(GravacPolicyTest, CandidateCanWinWhenThetaMinWouldNot) {
  // Error feedback can make the candidate's gain exceed θ_min's (and even 1).
  Driver drv(SmallConfig());
  const Decision d = ThroughFirstBoundary(drv, 0.5, 1.2).back();
  EXPECT_NEAR(d.gain_c, 1.2, 1e-12);
  EXPECT_EQ(d.theta, 20.0);
}

TEST(GravacPolicyTest, BothGainsLowMeansDense) {
  Driver drv(SmallConfig());
  const Decision d = ThroughFirstBoundary(drv, 0.5, 0.6).back();
  EXPECT_EQ(d.theta, kDense);
  EXPECT_EQ(d.theta_candidate, 20.0);
}

TEST(GravacPolicyTest, GainEqualToEpsilonIsAccepted) {
  // α = 0 makes the window a plain mean, so 3/4 is exactly 0.75 = ε.
  Driver at(SmallConfig(/*alpha=*/0.0));
  EXPECT_EQ(ThroughFirstBoundary(at, 0.5, 0.75).back().theta, 20.0);
  Driver below(SmallConfig(/*alpha=*/0.0));
  EXPECT_EQ(ThroughFirstBoundary(below, 0.75, 0.5).back().theta, 10.0);
}

// Daemons adopt a decision late: steps after a candidate change still carry the old θ_c's N_c.
// Those norms must not fill the new candidate's tracker.
TEST(GravacPolicyTest, StaleCandidateNormsAreIgnored) {
  ASSERT_OK_AND_ASSIGN(GravacPolicy p, GravacPolicy::Create(SmallConfig()));
  int64_t step = 0;
  auto feed = [&](double candidate, double n_c) {
    StepStats s = ValidStats(step++);
    s.theta_used = p.current().theta;
    s.theta_candidate = candidate;
    s.n_c = n_c;
    return p.Observe(s);
  };
  for (int i = 0; i < 20; ++i) ASSERT_THAT(feed(10.0, 3.6), IsOk());
  ASSERT_EQ(p.current().theta_candidate, 20.0);
  // Ten late steps still at θ_c = 10, with an N_c that would look excellent.
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(Decision d, feed(10.0, 4.0));
    EXPECT_EQ(d.theta, 10.0);
    EXPECT_EQ(d.gain_c, 0.0);
  }
  // The candidate's own norms (gain 0.8): chosen exactly when 4 of them are in.
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Decision d, feed(20.0, 3.2));
    EXPECT_EQ(d.theta, 10.0);
  }
  ASSERT_OK_AND_ASSIGN(Decision d, feed(20.0, 3.2));
  EXPECT_EQ(d.theta, 20.0);
  EXPECT_NEAR(d.gain_c, 0.8, 1e-12);
}

TEST(GravacPolicyTest, GainsDoNotStartEpochsChoicesDo) {
  Driver drv(SmallConfig());
  for (int i = 0; i < 4; ++i) drv.StepOk(0.9, 0.9);
  const Decision first = drv.policy().current();
  ASSERT_EQ(first.epoch, 1);
  // Different gains, same choice (θ_min): same epoch, gains refreshed.
  for (double g : {0.95, 0.85, 0.99}) {
    const Decision d = drv.StepOk(g, g);
    EXPECT_EQ(d.epoch, 1);
    EXPECT_EQ(d.first_step, first.first_step);
    EXPECT_TRUE(d.SameChoice(first));
  }
  EXPECT_NE(drv.policy().current().gain_min, first.gain_min);
  // Gains collapse: dense becomes the choice at some step, with a new epoch starting after it.
  Decision d;
  for (int i = 0; i < 40 && d.theta != kDense; ++i) d = drv.StepOk(0.05, 0.05);
  ASSERT_EQ(d.theta, kDense);
  EXPECT_EQ(d.epoch, 2);
  EXPECT_EQ(d.first_step, drv.next_step());
}

TEST(GravacPolicyTest, ZeroGradientNormLeavesGainsUndefined) {
  ASSERT_OK_AND_ASSIGN(GravacPolicy p, GravacPolicy::Create(SmallConfig()));
  Decision d;
  for (int i = 0; i < 6; ++i) {
    StepStats s = ValidStats(i);
    s.n_g = 0.0;
    s.n_min = 0.0;
    s.n_c = 0.0;
    ASSERT_OK_AND_ASSIGN(d, p.Observe(s));
  }
  EXPECT_EQ(d.gain_min, 0.0);
  EXPECT_EQ(d.theta, kDense);  // nothing measurable: the safe collective
  // No CT sample was recorded for θ_min with an undefined gain.
  EXPECT_EQ(p.throughput_table().Find(10.0), nullptr);
}

// A small deterministic generator, so the stream is varied but reproducible.
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  double Uniform() {  // [0, 1)
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state_ >> 11) / static_cast<double>(1ULL << 53);
  }

 private:
  uint64_t state_;
};

std::vector<Decision> RunNoisyStream(GravacPolicy& p, uint64_t seed, int steps) {
  Lcg rng(seed);
  std::vector<Decision> out;
  for (int i = 0; i < steps; ++i) {
    StepStats s;
    s.step = i;
    s.theta_used = p.current().theta;
    s.theta_candidate = p.current().theta_candidate;
    s.n_g = 50.0 + 10.0 * rng.Uniform();
    // Gains wander across ε so every branch of the choice is taken.
    s.n_min = s.n_g * (0.55 + 0.5 * rng.Uniform());
    s.n_c = s.n_g * (0.45 + 0.5 * rng.Uniform() - 0.02 * std::log2(s.theta_candidate / 10.0));
    s.step_seconds = 0.1 + 1.0 / s.theta_used + 0.05 * rng.Uniform();
    s.samples = 256;
    absl::StatusOr<Decision> d = p.Observe(s);
    EXPECT_THAT(d, IsOk());
    if (d.ok()) out.push_back(*d);
  }
  return out;
}

// θ (of the decision after each step) for steps 0..59 fed with gain_min 0.9 and a candidate gain
// that alternates 0.9, 0.6, 0.9, ... (step by step): with α = 0.99 the tracker follows its newest
// sample, so gain_c crosses ε = 0.75 every step, as a gain hovering at ε does in a real job.
std::vector<double> ThetasWithHoveringGain(int min_dwell) {
  Driver drv(SmallConfig(/*alpha=*/0.99, min_dwell));
  std::vector<double> thetas;
  for (int i = 0; i < 60; ++i) thetas.push_back(drv.StepOk(0.9, i % 2 == 0 ? 0.9 : 0.6).theta);
  return thetas;
}

// Lengths of the runs of equal θ in steps [from, to), the last (possibly cut) run left out.
std::vector<int> RunLengths(const std::vector<double>& thetas, int from, int to) {
  std::vector<int> runs;
  int length = 1;
  for (int i = from + 1; i < to; ++i) {
    if (thetas[i] == thetas[i - 1]) {
      ++length;
    } else {
      runs.push_back(length);
      length = 1;
    }
  }
  return runs;
}

TEST(GravacPolicyTest, WithoutDwellAHoveringGainFlipsThetaEveryStep) {
  const std::vector<double> t = ThetasWithHoveringGain(/*min_dwell=*/0);
  // Period 2 (θ_c = 20) from step 20; its tracker is full from step 23 on.
  for (int i = 24; i < 40; ++i) EXPECT_EQ(t[i], i % 2 == 0 ? 20.0 : 10.0) << "step " << i;
}

TEST(GravacPolicyTest, DwellHoldsEachThetaForAtLeastMinDwellSteps) {
  const std::vector<double> t = ThetasWithHoveringGain(/*min_dwell=*/6);
  // Within period 2 θ still moves between 10 and 20, but each θ lasts at least 6 steps: θ = 20
  // from step 24 (its tracker full, θ_min's dwell long over), then runs of 6 or more. The last
  // run is cut by the boundary at step 39, where θ_c becomes 40 and θ = 20 is dropped at once.
  EXPECT_EQ(t[23], 10.0);
  EXPECT_EQ(t[24], 20.0);
  const std::vector<int> runs = RunLengths(t, 24, 39);
  ASSERT_GE(runs.size(), 2u);
  for (int r : runs) EXPECT_GE(r, 6);
  std::set<double> seen(t.begin() + 24, t.begin() + 39);
  EXPECT_EQ(seen, (std::set<double>{10.0, 20.0}));
}

TEST(GravacPolicyTest, DwellCutsDecisionEpochs) {
  Driver free_choice(SmallConfig(/*alpha=*/0.99, /*min_dwell=*/0));
  Driver dwell(SmallConfig(/*alpha=*/0.99, /*min_dwell=*/10));
  for (int i = 0; i < 60; ++i) {
    const double gain_c = i % 2 == 0 ? 0.9 : 0.6;
    free_choice.StepOk(0.9, gain_c);
    dwell.StepOk(0.9, gain_c);
  }
  // Epochs also count candidate changes (3 boundaries); θ flips add the rest.
  EXPECT_GT(free_choice.policy().current().epoch, 30);
  EXPECT_LE(dwell.policy().current().epoch, 3 + 60 / 10 + 1);
}

TEST(GravacPolicyTest, DwellNeverHoldsACandidateTheSearchLeft) {
  // θ = 20 is chosen at step 23 (gain_c 0.8); the period ends at step 39 and θ_c becomes 40.
  // However long the dwell, θ = 20 is not held past the boundary: the rule falls back to θ_min
  // while the new candidate's tracker fills.
  Driver drv(SmallConfig(/*alpha=*/0.05, /*min_dwell=*/1000));
  std::vector<Decision> ds;
  for (int i = 0; i < 41; ++i) ds.push_back(drv.StepOk(0.9, 0.8));
  EXPECT_EQ(ds[22].theta, 10.0);
  EXPECT_EQ(ds[23].theta, 20.0);  // chosen as soon as its tracker is full
  EXPECT_EQ(ds[38].theta, 20.0);
  EXPECT_EQ(ds[39].theta_candidate, 40.0);
  EXPECT_EQ(ds[39].theta, 10.0);  // the old candidate is dropped at once, dwell or not
  EXPECT_EQ(ds[40].theta, 10.0);
}

// A dwell as long as the period (the README's job: min_dwell 25, eval_steps 25) must not keep
// the fallback to θ_min at a boundary in force until the next boundary: then no candidate past
// the first would ever be sent or measured, and the search would walk to θ_max at θ_min.
TEST(GravacPolicyTest, DwellDoesNotStarveNewCandidates) {
  Driver drv(SmallConfig(/*alpha=*/0.05, /*min_dwell=*/20));
  std::vector<Decision> ds;
  for (int i = 0; i < 64; ++i) ds.push_back(drv.StepOk(0.9, 0.8));
  EXPECT_EQ(ds[23].theta, 20.0);
  EXPECT_EQ(ds[39].theta, 10.0);  // boundary: θ_c = 40, its tracker empty
  EXPECT_EQ(ds[43].theta, 40.0);  // measured after 4 steps and sent, θ_min's fallback not held
  EXPECT_EQ(ds[59].theta_candidate, 80.0);
  EXPECT_EQ(ds[63].theta, 80.0);
  EXPECT_EQ(drv.policy().throughput_table().entries().size(), 3u);  // 10, 20, 40 measured
}

TEST(GravacPolicyTest, DwellHoldsDenseToo) {
  // Gains collapse at step 10: dense from the first step the smoothed gains are below ε; then
  // they recover at once, and dense is kept until its dwell has passed.
  Driver drv(SmallConfig(/*alpha=*/0.99, /*min_dwell=*/8));
  std::vector<double> thetas;
  for (int i = 0; i < 40; ++i) {
    const double g = (i == 10) ? 0.1 : 0.9;
    thetas.push_back(drv.StepOk(g, g).theta);
  }
  EXPECT_EQ(thetas[9], 10.0);
  EXPECT_EQ(thetas[10], kDense);
  for (int i = 11; i < 18; ++i) EXPECT_EQ(thetas[i], kDense) << "step " << i;
  EXPECT_EQ(thetas[18], 10.0);
}

// The accuracy guard (min_relative_gain r). Gains 2.0 at θ_min and 0.8 at θ_c = 20: the candidate
// passes ε, as the inflated gains of error feedback do, but keeps 0.4 of θ_min's norm.
std::vector<double> ThetasWithRelativeGain(double min_relative_gain, double gain_c) {
  PolicyConfig c = SmallConfig();
  c.min_relative_gain = min_relative_gain;
  Driver drv(c);
  std::vector<double> thetas;
  for (int i = 0; i < 40; ++i) thetas.push_back(drv.StepOk(2.0, gain_c).theta);
  return thetas;
}

TEST(GravacPolicyTest, RelativeGainGuardKeepsThetaMinWhenTheCandidateWithholdsTooMuch) {
  // θ_c = 20 from step 20, its tracker full at step 23; the period ends at step 39 (θ_c = 40).
  std::vector<double> paper(40, 10.0), guarded(40, 10.0), passing(40, 10.0);
  for (int i = 23; i < 39; ++i) paper[i] = passing[i] = 20.0;
  EXPECT_EQ(ThetasWithRelativeGain(/*r=*/0.0, /*gain_c=*/0.8), paper);    // ε alone: 20
  EXPECT_EQ(ThetasWithRelativeGain(/*r=*/0.5, /*gain_c=*/0.8), guarded);  // 0.4 < 0.5: θ_min
  EXPECT_EQ(ThetasWithRelativeGain(/*r=*/0.5, /*gain_c=*/1.2), passing);  // 0.6 >= 0.5: 20
  EXPECT_EQ(ThetasWithRelativeGain(/*r=*/0.35, /*gain_c=*/0.8), paper);   // 0.4 >= 0.35: 20
}

TEST(GravacPolicyTest, RelativeGainGuardDoesNotOverrideEpsilon) {
  // gain_c / gain_min = 1 but gain_c = 0.7 < ε: neither θ_c nor θ_min, dense from step 3 (the
  // trackers full), whatever r is.
  PolicyConfig c = SmallConfig();
  c.min_relative_gain = 0.5;
  Driver drv(c);
  std::vector<double> thetas;
  for (int i = 0; i < 30; ++i) thetas.push_back(drv.StepOk(0.7, 0.7).theta);
  std::vector<double> expected(30, kDense);
  expected[0] = expected[1] = expected[2] = 10.0;
  // θ_c = 20 from step 20: from the boundary (step 19) until its tracker is full again (step 23)
  // the rule falls back to θ_min.
  for (int i = 19; i < 23; ++i) expected[i] = 10.0;
  EXPECT_EQ(thetas, expected);
}

// While θ_c is sent, its larger residual inflates N_min far more than N_c, so gain_c / gain_min
// falls because θ_c is in use (Fashion-MNIST CNN, θ_c = 100: 0.77-0.82 of θ_min's norm while θ_min
// was sent, 0.42-0.60 while 100 was). Here 0.8 under θ_min and 0.5 under θ_c = 20, guard 0.6: the
// verdict of the windows sent at θ_min holds while 20 is sent, instead of dropping it.
TEST(GravacPolicyTest, RelativeGainGuardJudgesOnlyWindowsSentAtThetaMin) {
  PolicyConfig c = SmallConfig();
  c.min_relative_gain = 0.6;
  GravacPolicy p = GravacPolicy::Create(c).value();
  std::vector<double> thetas;
  for (int64_t step = 0; step < 39; ++step) {
    StepStats s = ValidStats(step);
    s.theta_used = p.current().theta;
    s.theta_candidate = p.current().theta_candidate;
    const bool candidate_sent = s.theta_used == 20.0;
    s.n_g = 4.0;
    s.n_min = candidate_sent ? 8.0 : 4.0;
    s.n_c = s.theta_candidate == 10.0 ? s.n_min : candidate_sent ? 4.0 : 3.2;
    absl::StatusOr<Decision> d = p.Observe(s);
    ASSERT_THAT(d, IsOk());
    thetas.push_back(d->theta);
  }
  std::vector<double> expected(39, 10.0);
  for (int i = 23; i < 39; ++i) expected[i] = 20.0;  // measured at step 23, sent to the period end
  EXPECT_EQ(thetas, expected);
}

// The Fashion-MNIST incident (bench/e2e, 4 Dec 2026, exponential, θ_max 1000): gain_min 2.0,
// θ_c = 100 at gain 0.6 (below ε), θ_c = 1000 at 0.8 (above ε, 0.4 of θ_min's); steps at θ_min
// take 1 s and at θ = 1000 0.25 s, so θ = 1000 tops the throughput table once it has been sent.
std::vector<Decision> ExponentialIncident(double min_relative_gain) {
  PolicyConfig c = SmallConfig();
  c.scaling = ScalingKind::kExponential;
  c.theta_max = 1000.0;
  c.min_relative_gain = min_relative_gain;
  GravacPolicy p = GravacPolicy::Create(c).value();
  std::vector<Decision> out;
  for (int64_t step = 0; step < 64; ++step) {
    StepStats s;
    s.step = step;
    s.theta_used = p.current().theta;
    s.theta_candidate = p.current().theta_candidate;
    s.n_g = 4.0;
    s.n_min = 8.0;
    s.n_c = s.theta_candidate == 10.0 ? 8.0 : s.theta_candidate == 100.0 ? 2.4 : 3.2;
    s.step_seconds = s.theta_used == 1000.0 ? 0.25 : 1.0;
    s.samples = 64;
    absl::StatusOr<Decision> d = p.Observe(s);
    EXPECT_THAT(d, IsOk());
    out.push_back(d.ok() ? *d : Decision{});
  }
  return out;
}

TEST(GravacPolicyTest, ExponentialIncidentWithoutTheGuardEndsAtThetaMax) {
  const std::vector<Decision> ds = ExponentialIncident(/*min_relative_gain=*/0.0);
  for (int i = 0; i < 43; ++i) EXPECT_EQ(ds[i].theta, 10.0) << "step " << i;
  EXPECT_EQ(ds[19].theta_candidate, 100.0);
  EXPECT_EQ(ds[39].theta_candidate, 1000.0);
  for (int i = 43; i < 64; ++i) EXPECT_EQ(ds[i].theta, 1000.0) << "step " << i;
  // Period 3 ends at step 59 with θ_c = θ_max: CT[1000] = 256 samples/s · 0.8 = 204.8 against
  // CT[10] = 64 · 2.0 = 128, so the search stops at 1000 and sends it from then on.
  EXPECT_TRUE(ds[58].searching);
  EXPECT_FALSE(ds[59].searching);
  EXPECT_EQ(ds[59].phase, Phase::kDone);
  EXPECT_EQ(ds[63].theta_candidate, 1000.0);
}

TEST(GravacPolicyTest, ExponentialIncidentWithTheGuardStaysAtThetaMin) {
  const std::vector<Decision> ds = ExponentialIncident(/*min_relative_gain=*/0.5);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(ds[i].theta, 10.0) << "step " << i;
  EXPECT_EQ(ds[39].theta_candidate, 1000.0);
  // θ = 1000 was never sent, so only θ_min is ranked: the search ends there.
  EXPECT_FALSE(ds[59].searching);
  EXPECT_EQ(ds[59].theta_candidate, 10.0);
  EXPECT_EQ(ds[63].theta_candidate, 10.0);
  EXPECT_EQ(ds[63].epoch, 4);  // θ_c 100, 1000, 10 (with the stop): three changes after warm-up
}

// Each ended search period is reported once (on the Observe that ended it): the candidate's gains
// against ε and the guard, the steps sent at it, its CT mean and the next candidate.
TEST(GravacPolicyTest, ReportsEachEndedPeriodWithItsGainsAgainstEpsilonAndTheGuard) {
  PolicyConfig c = SmallConfig();
  c.min_relative_gain = 0.6;
  Driver job(c);
  for (int i = 0; i < 19; ++i) {
    job.StepOk(1.0, 1.0);
    EXPECT_FALSE(job.policy().ended_period().has_value()) << "step " << i;
  }
  job.StepOk(1.0, 1.0);  // step 19 ends period 1 (θ_c = θ_min)
  ASSERT_TRUE(job.policy().ended_period().has_value());
  PeriodReport first = *job.policy().ended_period();
  EXPECT_EQ(first.theta_c, 10.0);
  EXPECT_EQ(first.last_step, 19);
  EXPECT_EQ(first.steps, 20);
  EXPECT_EQ(first.measured, 17);  // from step 3, when W = 4 samples fill the trackers
  EXPECT_EQ(first.sent_at_c, 0);  // θ_min is not a candidate's use
  EXPECT_EQ(first.next_theta_c, 20.0);
  EXPECT_FALSE(first.search_ended);

  // θ_c = 20 keeps half of θ_min's norm: below ε and the guard on every measured step.
  for (int i = 0; i < 20; ++i) job.StepOk(1.0, 0.5);
  ASSERT_TRUE(job.policy().ended_period().has_value());
  const PeriodReport second = *job.policy().ended_period();
  EXPECT_EQ(second.theta_c, 20.0);
  EXPECT_EQ(second.last_step, 39);
  EXPECT_EQ(second.measured, 17);  // the new candidate's tracker refills over steps 20-23
  EXPECT_EQ(second.passed_epsilon, 0);
  EXPECT_EQ(second.passed_guard, 0);
  EXPECT_EQ(second.sent_at_c, 0);
  EXPECT_DOUBLE_EQ(second.gain_c_min, 0.5);
  EXPECT_DOUBLE_EQ(second.gain_c_max, 0.5);
  EXPECT_DOUBLE_EQ(second.gain_min_last, 1.0);
  EXPECT_EQ(second.ct_mean, 0.0);
  EXPECT_EQ(second.next_theta_c, 40.0);
  const std::string text = second.DebugString(c.epsilon, c.min_relative_gain);
  EXPECT_THAT(text, HasSubstr("search period of theta_c 20 ended at step 39"));
  EXPECT_THAT(text, HasSubstr(">= epsilon 0.75 on 0, guard (>= 0.6 gain_min) on 0"));
  EXPECT_THAT(text, HasSubstr("CT mean none; next theta_c 40"));

  // θ_c = 40 passes both from its measurement (step 23 of the period) and is sent from the next.
  for (int i = 0; i < 20; ++i) job.StepOk(1.0, 0.8);
  ASSERT_TRUE(job.policy().ended_period().has_value());
  const PeriodReport third = *job.policy().ended_period();
  EXPECT_EQ(third.theta_c, 40.0);
  EXPECT_EQ(third.measured, 17);
  EXPECT_EQ(third.passed_epsilon, 17);
  EXPECT_EQ(third.passed_guard, 17);
  EXPECT_EQ(third.sent_at_c, 16);  // steps 44-59
  EXPECT_DOUBLE_EQ(third.ct_mean, 64 / 0.5 * 0.8);
  EXPECT_EQ(third.next_theta_c, 80.0);  // 102.4 against θ_min's 128: 25% apart, > ω
  job.StepOk(1.0, 0.8);
  EXPECT_FALSE(job.policy().ended_period().has_value());
}

TEST(GravacPolicyTest, DeterministicForTheSameStatistics) {
  PolicyConfig c = SmallConfig();
  c.window = 5;
  c.eval_steps = 30;
  c.theta_max = 640;
  ASSERT_OK_AND_ASSIGN(GravacPolicy a, GravacPolicy::Create(c));
  ASSERT_OK_AND_ASSIGN(GravacPolicy b, GravacPolicy::Create(c));
  const std::vector<Decision> da = RunNoisyStream(a, 42, 600);
  const std::vector<Decision> db = RunNoisyStream(b, 42, 600);
  EXPECT_EQ(da, db);
  EXPECT_EQ(a.candidate_history(), b.candidate_history());
  ASSERT_EQ(a.throughput_table().entries().size(), b.throughput_table().entries().size());
  for (const auto& [theta, e] : a.throughput_table().entries()) {
    const ThroughputTable::Entry* f = b.throughput_table().Find(theta);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(e.sum, f->sum);
    EXPECT_EQ(e.samples, f->samples);
  }
  // The stream is not trivial: dense, θ_min and a larger candidate were all chosen.
  std::set<double> chosen;
  for (const Decision& d : da) chosen.insert(d.theta);
  EXPECT_TRUE(chosen.count(kDense));
  EXPECT_TRUE(chosen.count(10.0));
  EXPECT_GE(chosen.size(), 3u);
  EXPECT_GE(a.candidate_history().size(), 2u);
}

}  // namespace
}  // namespace gravac::policy

// GravacPolicy: the GraVAC policy engine. Per-step statistics in, compression decisions out.
//
// The engine is pure and deterministic: no clocks, I/O, threads or randomness. Two engines built
// from the same PolicyConfig and fed the same StepStats sequence return identical Decisions. The
// controller feeds it statistics already combined across nodes (norms summed, the slowest rank's
// time), so every rank is governed by the same numbers.
//
// Observe(stats), for one step s, in this order (GRAVAC.md; choices the spec leaves open marked *):
//  1. Validation. InvalidArgument, leaving the engine unchanged, for a step not greater than the
//     last observed one (duplicate or out of order), a non-finite or negative norm, a step time
//     that is not finite and > 0, samples <= 0, or a θ outside {1} ∪ [θ_min, θ_max]. *Gaps in the
//     step index are allowed; periods and warm-up count observed steps, not indices.
//  2. Trackers. N_g and N_min always enter their trackers. *N_c enters the candidate tracker only
//     if stats.theta_candidate equals the engine's current θ_c: the candidate gain comes from the
//     candidate's own compression, never from θ_min tensors or a previous candidate's (daemons
//     adopt decisions late, so a few steps after a change still carry the old candidate).
//  3. Gains: gain_min = T(N_min)/T(N_g), gain_c = T(N_c)/T(N_g), ratios of smoothed values (they
//     may exceed 1). A gain is defined once both its trackers are full and T(N_g) > 0; otherwise
//     it reads 0.
//  4. CT[θ_used] += throughput × gain_used, throughput = samples / step_seconds. Dense (θ = 1)
//     always adds with gain 1. *A compressed θ adds only while its gain is defined: θ_min with
//     gain_min, the current θ_c with gain_c; steps at any other θ (a stale candidate) and steps
//     before the trackers fill add nothing, so no mean is diluted by undefined gains.
//  5. Search, while searching, after every T_eval-th observed step (period p covers observations
//     (p−1)·T_eval+1 .. p·T_eval; the first period, with θ_c = θ_min, includes the warm-up):
//       - θ_c's period is complete. *"A full period" for θ: θ was the candidate for one whole
//         period (it is rankable from then on, with the mean of all its CT samples).
//       - Among rankable compressed θ take the two best means v1 >= v2 (θ1, θ2). If
//         (v1 − v2)/v2 < ω the search stops with θ_c = max(θ1, θ2), the more compressed.
//       - *Else, if θ_c is already θ_max (the θ_max period just ended: nothing is left to try),
//         the search stops with θ_c = θ1, the best measured θ (θ_min if nothing was measured).
//       - Else θ_c = min(next(θ_c), θ_max) (geometric θ·s or exponential θ·θ_min).
//       - Whenever θ_c changes, the candidate tracker restarts empty. *If the stop keeps the
//         current θ_c, its tracker is kept (it already holds that θ's norms).
//  6. Per-step choice for the coming steps:
//       warm-up (fewer than W observed steps) or a tracker not full  → θ_min
//       gain_c >= ε and gain_c >= r·gain_min → θ_c;   gain_min >= ε → θ_min;   else dense (θ = 1).
//     *r = PolicyConfig::min_relative_gain, an accuracy guard the paper lacks (r = 0 is its rule):
//     with error feedback N_c measures top-k of g + e, and the residual e a compressed θ leaves
//     behind grows with θ, so gain_c can pass ε at a θ that withholds most of the gradient
//     (θ = 1000 on the Fashion-MNIST CNN: gain_c 0.80, gain_min 2.16). Both gains come from the
//     same compensated gradient, so their ratio T(N_c)/T(N_min) is the share of θ_min's selection
//     the candidate keeps, free of that inflation. For top-k it is at least about sqrt(θ_min/θ_c)
//     (the largest k/m of k elements hold at least 1/m of their energy), so with r = 0.6 every
//     θ_c <= 2.7·θ_min passes whatever the gradient; larger θ_c pass only on gradients whose mass is
//     concentrated enough. While θ_c = θ_min the guard does not apply.
//     *The ratio is judged only on windows sent at θ_min or dense throughout (W consecutive such
//     steps), and the verdict holds until the next such window or a new θ_c: while θ_c itself is
//     sent, the residual it leaves is larger, and that residual inflates N_min far more than N_c
//     (top-k at θ_min takes in much more of e than top-k at θ_c), so the ratio falls because θ_c
//     is in use, not because it keeps less of the gradient. Measured on the Fashion-MNIST CNN
//     (dense layer compressed, bench/e2e/topk_sim.py): θ_c = 100 keeps 0.77-0.82 of θ_min's
//     norm while θ_min is sent (from step 90) and 0.42-0.60 while 100 is sent; judged every
//     step, the guard dropped a candidate it had passed once it had been sent for a while
//     (θ_c 80, step 290: 1.157 / 1.970 = 0.59 < 0.6).
//     *After the search stops θ_c stays fixed, its tracker keeps filling from the candidate
//     norms, and ε still guards every step: it falls back to θ_min or dense when gain_c drops.
//     While θ_c = θ_min the decision is θ_min (compressed and sent), never "send nothing".
//     *Dwell (PolicyConfig::min_dwell, D): once the gains (all trackers full) change θ, the new
//     θ is kept for at least D observed steps whatever the gains say; then the rule above
//     decides again. Without it a gain that hovers at ε flips θ between θ_c and θ_min every step
//     or two, and every flip is a new epoch the daemons must adopt. The dwell never holds a θ
//     the search has left (an old θ_c after the candidate changed), and a fallback to θ_min
//     while a tracker fills (warm-up, a new candidate) starts no dwell, so each candidate is
//     used as soon as its gain is measured, however long D is against T_eval. D = 0 (or 1) is
//     the paper's per-step choice.
//  7. The Decision's epoch increments, with first_step = s + 1, whenever any of theta,
//     theta_candidate, searching or phase differs from the current decision. gain_min and gain_c
//     are refreshed every step and do not by themselves start a new epoch.
//
// Thread-safety: not thread-safe; the owner serialises calls (the controller runs it on one
// strand). The object is movable.
#ifndef GRAVAC_CONTROLLER_POLICY_GRAVAC_POLICY_H_
#define GRAVAC_CONTROLLER_POLICY_GRAVAC_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/policy/policy_config.h"
#include "controller/policy/scaling_policy.h"
#include "controller/policy/throughput_table.h"
#include "controller/policy/window_tracker.h"

namespace gravac::policy {

// One training step, already combined across all nodes.
struct StepStats {
  int64_t step = 0;               // >= 0, strictly increasing across calls
  double theta_used = 10.0;       // the CF this step was sent with; 1 = dense
  double theta_candidate = 10.0;  // the θ_c that N_c was computed at
  double n_g = 0.0;               // norm sum of the raw gradient (NormMode)
  double n_min = 0.0;             // the same over C(g + e) at θ_min
  double n_c = 0.0;               // the same over C(g + e) at theta_candidate
  double step_seconds = 0.0;      // the slowest rank's time for the step
  int64_t samples = 0;            // samples processed by the whole job in the step
};

enum class Phase { kWarmup, kSearching, kDone };
std::string_view PhaseName(Phase phase);  // "warmup" / "searching" / "done"

struct Decision {
  int64_t epoch = 0;              // increments whenever the decision changes
  int64_t first_step = 0;         // first step this epoch applies to
  double theta = 10.0;            // CF for the coming steps; 1 = dense
  double theta_candidate = 10.0;  // θ_c; daemons compute N_c at it
  bool searching = true;
  Phase phase = Phase::kWarmup;
  double gain_min = 0.0;  // at the last observed step; 0 while undefined
  double gain_c = 0.0;

  bool operator==(const Decision&) const = default;
  // The fields that define an epoch (everything but the gains and epoch bookkeeping).
  bool SameChoice(const Decision& other) const;
  std::string DebugString() const;
};

// One search period that has ended (step 5): what its candidate measured against ε and the
// accuracy guard, and what the search did next. The controller logs it, so a run shows why a θ
// was or was not used. Gains are counted over the period's steps with the candidate's gain defined
// (its tracker full).
struct PeriodReport {
  int64_t last_step = 0;      // the period's last observed step
  double theta_c = 0.0;       // the candidate it evaluated
  int64_t steps = 0;          // observed steps in the period
  int64_t measured = 0;       // of them, steps with gain_c defined
  int64_t passed_epsilon = 0;  // of those, gain_c >= ε
  int64_t passed_guard = 0;    // of those, gain_c >= min_relative_gain · gain_min
  int64_t sent_at_c = 0;      // steps of the period sent at θ_c
  double gain_c_min = 0.0;    // range of gain_c over the measured steps (0 when none)
  double gain_c_max = 0.0;
  double gain_c_last = 0.0;   // at the period's last step, with gain_min beside it
  double gain_min_last = 0.0;
  double ct_mean = 0.0;       // θ_c's CT mean after the period (0: no sample)
  double next_theta_c = 0.0;  // θ_c from the next step on
  bool search_ended = false;
  bool operator==(const PeriodReport&) const = default;
  std::string DebugString(double epsilon, double min_relative_gain) const;
};

// One entry of the θ_c trajectory: θ_c became `theta` from step `first_step` on.
struct CandidateChange {
  int64_t first_step = 0;
  double theta = 0.0;
  bool operator==(const CandidateChange&) const = default;
};

class GravacPolicy {
 public:
  // InvalidArgument when config.Validate() fails.
  static absl::StatusOr<GravacPolicy> Create(PolicyConfig config);

  // Processes one step (see the file comment) and returns the decision now in force.
  absl::StatusOr<Decision> Observe(const StepStats& stats);

  // The decision in force: before any Observe, epoch 0 with θ = θ_c = θ_min in warm-up.
  const Decision& current() const { return current_; }
  const PolicyConfig& config() const { return config_; }
  const ThroughputTable& throughput_table() const { return table_; }
  // θ_c over time, starting with θ_min at the first observed step; empty before any Observe.
  const std::vector<CandidateChange>& candidate_history() const { return history_; }
  int64_t observed_steps() const { return observed_; }
  // The search period the last Observe ended, if it ended one (cleared by the next Observe).
  const std::optional<PeriodReport>& ended_period() const { return ended_period_; }
  // Last observed step index; -1 before any Observe.
  int64_t last_step() const { return last_step_; }

 private:
  explicit GravacPolicy(PolicyConfig config);

  absl::Status CheckStats(const StepStats& stats) const;
  bool InRange(double theta) const;
  void RecordThroughput(const StepStats& stats, std::optional<double> gain_min,
                        std::optional<double> gain_c);
  void EndPeriod(int64_t next_step);
  // Adds step s's gains and θ to the running period's counts.
  void CountPeriod(const StepStats& s, std::optional<double> gain_min,
                   std::optional<double> gain_c);
  // Warm-up over and every tracker full: the gains are defined and the rule may use them.
  bool Measured() const;
  double Choose(std::optional<double> gain_min, std::optional<double> gain_c) const;
  // The accuracy guard of step 6: θ_c = θ_min, min_relative_gain 0, or the guard's verdict.
  bool KeepsEnough(std::optional<double> gain_min, std::optional<double> gain_c) const;
  // Sets the guard's verdict, gain_c >= min_relative_gain · gain_min, when the trackers' window
  // was sent at θ_min or dense throughout (clean_steps_ >= W); otherwise keeps it.
  void JudgeGuard(std::optional<double> gain_min, std::optional<double> gain_c);
  // Choose's θ, or the θ in force while it is within its dwell and still a valid choice.
  double Dwell(double chosen) const;

  PolicyConfig config_;
  WindowTracker norm_g_;
  WindowTracker norm_min_;
  WindowTracker norm_c_;
  ThroughputTable table_;
  std::vector<CandidateChange> history_;
  Decision current_;
  double theta_c_;
  bool searching_ = true;
  int64_t observed_ = 0;
  int64_t last_step_ = -1;
  // observed_ when the dwell of current_.theta began (-min_dwell: none, free to change).
  int64_t theta_since_;
  // Consecutive observed steps sent at θ_min or dense, up to the last one.
  int64_t clean_steps_ = 0;
  // The guard's verdict on the current θ_c; none until judged on a clean window.
  std::optional<bool> guard_verdict_;
  PeriodReport period_;  // the running period's counts
  std::optional<PeriodReport> ended_period_;
};

}  // namespace gravac::policy

#endif  // GRAVAC_CONTROLLER_POLICY_GRAVAC_POLICY_H_

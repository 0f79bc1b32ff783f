// StepUnder: one node's statistics for one step executed under a decision, for the tests of the
// controller and of the daemon's link to it. The figures (n_g ... bytes_dense) are the test's;
// node, step, θ, θ_c and the epoch are filled in as a daemon reports them (invariant 1).
//
// Thread-safety: stateless.
#ifndef GRAVAC_CORE_TESTING_STEP_STATS_H_
#define GRAVAC_CORE_TESTING_STEP_STATS_H_

#include <cstdint>

#include "core/job_types.h"

namespace gravac::testing {

// Figures of a plain step: gain 0.8 / 0.9, 0.1 s, 32 samples, a tenth of the dense bytes.
inline constexpr NodeStepStats kStepFigures = {.n_g = 1.0, .n_min = 0.9, .n_c = 0.8,
                                               .step_seconds = 0.1, .samples = 32,
                                               .bytes_sent = 100, .bytes_dense = 1000};

inline NodeStepStats StepUnder(const JobDecision& d, int node, int64_t step,
                               NodeStepStats figures = kStepFigures) {
  figures.node_rank = node;
  figures.step = step;
  figures.theta_used = d.theta;
  figures.theta_candidate = d.theta_candidate;
  figures.decision_epoch = d.epoch;
  return figures;
}

}  // namespace gravac::testing

#endif  // GRAVAC_CORE_TESTING_STEP_STATS_H_

// Helpers for the tests that drive a real Coordinator in-process (controller_metrics_test,
// job_registry_test): a node's join request, the small search both use, assembling a job and
// feeding it steps as its daemons would.
//
// Thread-safety: stateless; the Coordinator calls are the Coordinator's.
#ifndef GRAVAC_TESTS_CONTROLLER_COORDINATOR_FIXTURE_H_
#define GRAVAC_TESTS_CONTROLLER_COORDINATOR_FIXTURE_H_

#include <cstdint>
#include <string>

#include "controller/coordinator.h"
#include "core/testing/status_matchers.h"
#include "core/testing/step_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::controller::testing {

// Node i of a job of `nodes` nodes with `per_node` ranks each, named "n<i>".
inline JoinRequestInfo NodeJoin(int i, int nodes, int per_node = 1) {
  JoinRequestInfo r;
  r.node_name = "n" + std::to_string(i);
  r.first_rank = per_node * i;
  r.local_count = per_node;
  r.world_size = per_node * nodes;
  r.transport_address = "addr";
  return r;
}

// Warm-up 2 steps, 4 steps per candidate, θ in [10, 40], ε 0.5, no smoothing, no dwell (the
// per-step choice of the paper: candidates are used at once).
inline CoordinatorOptions SmallSearch(int nodes) {
  CoordinatorOptions o;
  o.nodes = nodes;
  o.policy.theta_min = 10;
  o.policy.theta_max = 40;
  o.policy.window = 2;
  o.policy.eval_steps = 4;
  o.policy.alpha = 0.0;
  o.policy.epsilon = 0.5;
  o.policy.min_dwell = 0;
  return o;
}

// Joins nodes 0..nodes-1 (NodeJoin) and checks that the job is assembled.
inline void Assemble(Coordinator& c, int nodes, int per_node = 1) {
  for (int i = 0; i < nodes; ++i) {
    c.Join(NodeJoin(i, nodes, per_node),
           [](absl::StatusOr<JoinReply> r) { ASSERT_THAT(r, IsOk()); });
  }
  ASSERT_TRUE(c.assembled());
}

// Steps [from, to) from every node, following the decision in force like a daemon, with the
// figures of gravac::testing::kStepFigures (the policy compresses: gain 0.9 at θ, 0.8 at θ_c).
inline void Feed(Coordinator& c, int nodes, int64_t from, int64_t to) {
  for (int64_t step = from; step < to; ++step) {
    const JobDecision d = c.Current();
    for (int n = 0; n < nodes; ++n) {
      ASSERT_THAT(c.ReportStats(::gravac::testing::StepUnder(d, n, step)), IsOk());
    }
  }
}

}  // namespace gravac::controller::testing

#endif  // GRAVAC_TESTS_CONTROLLER_COORDINATOR_FIXTURE_H_

// CoordinatorObserver: what the Coordinator reports as it happens, for metrics (ControllerMetrics
// in controller_metrics.h is the implementation; the Coordinator itself knows no Prometheus).
// Give one to CoordinatorOptions::observer; nullptr = none.
//
// Contract: the Coordinator calls these with its mutex held, in the order the events happen, so
// an observer sees a consistent sequence. Implementations must not block and must not call back
// into the Coordinator. An observer may serve several Coordinators one after the other (a
// controller restarted in the same process): OnCreated starts each one.
//
// Thread-safety: calls come from whichever thread drives the Coordinator, serialized per
// Coordinator by its mutex.
#ifndef GRAVAC_CONTROLLER_COORDINATOR_OBSERVER_H_
#define GRAVAC_CONTROLLER_COORDINATOR_OBSERVER_H_

#include <cstdint>
#include <map>
#include <string_view>

#include "absl/time/time.h"
#include "controller/policy/policy_config.h"
#include "controller/policy/throughput_table.h"
#include "core/enum_names.h"
#include "core/job_types.h"

namespace gravac::controller {

// Why statistics did not make a step the policy observed.
enum class StatsRejection {
  kThetaDisagrees,     // the nodes reported different θ / θ_c for the step (one per step)
  kOldEpoch,           // executed under a previous controller's decisions (one per step)
  kDroppedByNode,      // entries a daemon dropped before sending (one per entry)
  kIncompleteEvicted,  // not every node reported the step before it was given up (one per step)
  kPolicyRefused,      // the policy refused the combined step (one per step)
};
// Every reason with its metric label.
inline constexpr EnumName<StatsRejection> kStatsRejections[] = {
    {StatsRejection::kThetaDisagrees, "theta_disagrees"}, {StatsRejection::kOldEpoch, "old_epoch"},
    {StatsRejection::kDroppedByNode, "dropped_by_node"},
    {StatsRejection::kIncompleteEvicted, "incomplete_evicted"},
    {StatsRejection::kPolicyRefused, "policy_refused"}};
constexpr std::string_view StatsRejectionName(StatsRejection reason) {
  return NameOf(kStatsRejections, reason);
}

// One combined step the policy observed.
struct ObservedStep {
  int64_t step = 0;
  double step_seconds = 0.0;  // the slowest node's
  double throughput = 0.0;    // samples / step_seconds of the whole job
  // The policy's throughput table after the step: CT (throughput × gain) per evaluated θ.
  const std::map<double, policy::ThroughputTable::Entry>* throughput_table = nullptr;
};

class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;

  // Once per Coordinator, from Coordinator::Create: its configuration (the job's compression
  // settings as the daemons get them at join) and initial decision.
  virtual void OnCreated(int expected_nodes, const JobConfig& job,
                         const policy::PolicyConfig& policy,
                         const JobDecision& initial) = 0;
  // Daemons joined to the round being assembled, or to the assembled job; the job's world size
  // (0 before assembly).
  virtual void OnMembership(int joined_nodes, int world_size) = 0;
  // Daemons with at least one open decision stream.
  virtual void OnConnectedNodes(int nodes) = 0;
  // The decision in force changed: a new epoch was published at `when` (published = true), or
  // only its gains moved within the epoch (published = false).
  virtual void OnDecision(const JobDecision& decision, bool published, absl::Time when) = 0;
  // Every step all nodes reported, before the policy sees it (also steps refused later): the
  // bytes summed over the nodes.
  virtual void OnStepCombined(int64_t bytes_sent, int64_t bytes_dense) = 0;
  // A combined step the policy observed.
  virtual void OnStepObserved(const ObservedStep& step) = 0;
  // `count` statistics (entries or steps, see StatsRejection) did not make a step.
  virtual void OnStatsRejected(StatsRejection reason, int64_t count) = 0;
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_COORDINATOR_OBSERVER_H_

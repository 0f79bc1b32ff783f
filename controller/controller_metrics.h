// ControllerMetrics: gravac-controller's Prometheus metrics (docs/METRICS.md, the job table of
// issue #6). It registers the controller families on a registry and keeps them up to date as a
// CoordinatorObserver: the Coordinator reports each event (join, decision stream opened or
// closed, decision, step, refused statistics) and the matching series change there and then.
// (prometheus-cpp 1.0's Registry holds only its own families, so state is mirrored at events
// rather than read at scrape time.)
//
//   ASSIGN_OR_RETURN(auto endpoint, MetricsEndpoint::Start(address));
//   ControllerMetrics metrics(endpoint->registry());
//   options.coordinator.observer = &metrics;   // outlives the ControllerServer
//
// Families: gravac_controller_info, gravac_expected_nodes, gravac_joined_nodes,
// gravac_connected_nodes, gravac_world_size, gravac_theta, gravac_theta_candidate,
// gravac_decision_epoch, gravac_decisions_total, gravac_last_decision_timestamp_seconds,
// gravac_search_phase{phase}, gravac_compression_gain{level}, gravac_policy_{epsilon,omega,
// theta_min,theta_max}, gravac_throughput_samples_per_second,
// gravac_compression_throughput_samples_per_second{theta}, gravac_job_steps_total,
// gravac_job_step_duration_seconds, gravac_job_sent_bytes_total,
// gravac_job_dense_equivalent_bytes_total, gravac_stats_rejected_total{reason}.
//
// Counters live here, not in the Coordinator: they keep counting when the observer serves a new
// Coordinator (a controller restarted within the process), so they never decrease. Gauges start
// over with each Coordinator (OnCreated).
//
// Thread-safety: thread-safe; the registry must outlive this object. One ControllerMetrics per
// registry.
#ifndef GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_
#define GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "controller/coordinator_observer.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gravac::controller {

// The version gravac_controller_info reports (the CMake project version).
std::string_view GravacVersion();

class ControllerMetrics final : public CoordinatorObserver {
 public:
  explicit ControllerMetrics(prometheus::Registry& registry);
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  void OnCreated(int expected_nodes, const JobConfig& job,
                 const policy::PolicyConfig& policy, const JobDecision& initial) override;
  void OnMembership(int joined_nodes, int world_size) override;
  void OnConnectedNodes(int nodes) override;
  void OnDecision(const JobDecision& decision, bool published, absl::Time when) override;
  void OnStepCombined(int64_t bytes_sent, int64_t bytes_dense) override;
  void OnStepObserved(const ObservedStep& step) override;
  void OnStatsRejected(StatsRejection reason, int64_t count) override;

 private:
  void SetDecisionGauges(const JobDecision& decision);

  prometheus::Family<prometheus::Gauge>& info_;
  prometheus::Gauge& expected_nodes_;
  prometheus::Gauge& joined_nodes_;
  prometheus::Gauge& connected_nodes_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& theta_;
  prometheus::Gauge& theta_candidate_;
  prometheus::Gauge& decision_epoch_;
  prometheus::Counter& decisions_;
  prometheus::Gauge& last_decision_time_;
  prometheus::Family<prometheus::Gauge>& phase_;
  prometheus::Family<prometheus::Gauge>& gain_;
  prometheus::Gauge& phase_warmup_;
  prometheus::Gauge& phase_searching_;
  prometheus::Gauge& phase_done_;
  prometheus::Gauge& gain_min_;
  prometheus::Gauge& gain_candidate_;
  prometheus::Gauge& epsilon_;
  prometheus::Gauge& omega_;
  prometheus::Gauge& theta_min_;
  prometheus::Gauge& theta_max_;
  prometheus::Gauge& throughput_;
  prometheus::Family<prometheus::Gauge>& compression_throughput_;
  prometheus::Counter& job_steps_;
  prometheus::Histogram& job_step_duration_;
  prometheus::Counter& job_sent_bytes_;
  prometheus::Counter& job_dense_bytes_;
  prometheus::Family<prometheus::Counter>& rejected_;

  absl::Mutex mu_;
  prometheus::Gauge* info_series_ ABSL_GUARDED_BY(mu_) = nullptr;
  // One CT series per θ in the policy's table (removed when the table no longer has it).
  std::map<double, prometheus::Gauge*> ct_series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_

// ControllerMetrics: gravac-controller's Prometheus metrics (docs/METRICS.md, the job table of
// issue #6). It registers the controller families on a registry; ForJob makes the
// CoordinatorObserver of one job, whose series carry the labels job_name and run_id and change as
// the job's Coordinator reports each event (join, decision stream opened or closed, decision,
// step, refused statistics). (prometheus-cpp 1.0's Registry holds only its own families, so state
// is mirrored at events rather than read at scrape time.) The label is job_name, not job:
// Prometheus gives every target a `job` label (the scrape job), which the dashboards select on.
//
//   ASSIGN_OR_RETURN(auto endpoint, MetricsEndpoint::Start(address));
//   ControllerMetrics metrics(endpoint->registry());   // outlives the ControllerServer
//   options.observers = [&](const JobId& id) { return metrics.ForJob(id); };
//
// A job's observer removes the job's series when it is destroyed (the job was forgotten).
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
// Counters live here, not in the Coordinator: they keep counting when an observer serves a new
// Coordinator of its job (a controller restarted within the process), so they never decrease.
// Gauges start over with each Coordinator (OnCreated).
//
// Thread-safety: thread-safe; the registry must outlive this object and every observer ForJob
// made. One ControllerMetrics per registry.
#ifndef GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_
#define GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "controller/coordinator_observer.h"
#include "core/job_id.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gravac::controller {

// The version gravac_controller_info reports (the CMake project version).
std::string_view GravacVersion();

class JobMetrics;

class ControllerMetrics {
 public:
  explicit ControllerMetrics(prometheus::Registry& registry);
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  // The observer of job `id`: its series are labelled job_name = id.name, run_id = id.run_id.
  std::unique_ptr<CoordinatorObserver> ForJob(const JobId& id);

 private:
  friend class JobMetrics;

  prometheus::Family<prometheus::Gauge>& info_;
  prometheus::Family<prometheus::Gauge>& expected_nodes_;
  prometheus::Family<prometheus::Gauge>& joined_nodes_;
  prometheus::Family<prometheus::Gauge>& connected_nodes_;
  prometheus::Family<prometheus::Gauge>& world_size_;
  prometheus::Family<prometheus::Gauge>& theta_;
  prometheus::Family<prometheus::Gauge>& theta_candidate_;
  prometheus::Family<prometheus::Gauge>& decision_epoch_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Gauge>& last_decision_time_;
  prometheus::Family<prometheus::Gauge>& phase_;
  prometheus::Family<prometheus::Gauge>& gain_;
  prometheus::Family<prometheus::Gauge>& epsilon_;
  prometheus::Family<prometheus::Gauge>& omega_;
  prometheus::Family<prometheus::Gauge>& theta_min_;
  prometheus::Family<prometheus::Gauge>& theta_max_;
  prometheus::Family<prometheus::Gauge>& throughput_;
  prometheus::Family<prometheus::Gauge>& compression_throughput_;
  prometheus::Family<prometheus::Counter>& job_steps_;
  prometheus::Family<prometheus::Histogram>& job_step_duration_;
  prometheus::Family<prometheus::Counter>& job_sent_bytes_;
  prometheus::Family<prometheus::Counter>& job_dense_bytes_;
  prometheus::Family<prometheus::Counter>& rejected_;
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_CONTROLLER_METRICS_H_

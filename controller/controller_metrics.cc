// ControllerMetrics: the controller's metric families and their updates per Coordinator event.
#include "controller/controller_metrics.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "controller/policy/gravac_policy.h"
#include "controller/policy/scaling_policy.h"
#include "core/metrics.h"

#ifndef GRAVAC_VERSION
#define GRAVAC_VERSION "unknown"
#endif

namespace gravac::controller {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

prometheus::Gauge& NewGauge(prometheus::Registry& r, const std::string& name,
                            const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::Counter& NewCounter(prometheus::Registry& r, const std::string& name,
                                const std::string& help) {
  return BuildCounter().Name(name).Help(help).Register(r).Add({});
}

std::string ThetaLabel(double theta) { return absl::StrFormat("%g", theta); }

}  // namespace

std::string_view GravacVersion() { return GRAVAC_VERSION; }

ControllerMetrics::ControllerMetrics(prometheus::Registry& r)
    : info_(BuildGauge()
                .Name("gravac_controller_info")
                .Help("gravac-controller identity and configuration (always 1)")
                .Register(r)),
      expected_nodes_(NewGauge(r, "gravac_expected_nodes", "Daemons expected to join (--nodes)")),
      joined_nodes_(NewGauge(r, "gravac_joined_nodes",
                             "Daemons joined to the current membership (the round being "
                             "assembled, or the assembled job)")),
      connected_nodes_(
          NewGauge(r, "gravac_connected_nodes", "Daemons with an open WatchDecisions stream")),
      world_size_(NewGauge(r, "gravac_world_size", "Ranks in the job (0 before assembly)")),
      theta_(NewGauge(r, "gravac_theta", "Compression factor theta in force (1 = dense)")),
      theta_candidate_(
          NewGauge(r, "gravac_theta_candidate", "Candidate compression factor theta_c evaluated")),
      decision_epoch_(NewGauge(r, "gravac_decision_epoch", "Epoch of the newest decision")),
      decisions_(NewCounter(r, "gravac_decisions_total", "Decisions published to the daemons")),
      last_decision_time_(NewGauge(r, "gravac_last_decision_timestamp_seconds",
                                   "Unix time of the newest decision")),
      phase_(BuildGauge()
                 .Name("gravac_search_phase")
                 .Help("GraVAC search state: the series of the current phase is 1, the others 0")
                 .Register(r)),
      gain_(BuildGauge()
                .Name("gravac_compression_gain")
                .Help("Compression gain of the decision in force at theta_min (level=min) and at "
                      "the candidate theta_c (level=candidate)")
                .Register(r)),
      phase_warmup_(phase_.Add({{"phase", "warmup"}})),
      phase_searching_(phase_.Add({{"phase", "searching"}})),
      phase_done_(phase_.Add({{"phase", "done"}})),
      gain_min_(gain_.Add({{"level", "min"}})),
      gain_candidate_(gain_.Add({{"level", "candidate"}})),
      epsilon_(NewGauge(r, "gravac_policy_epsilon", "Least acceptable compression gain epsilon")),
      omega_(NewGauge(r, "gravac_policy_omega",
                      "The search stops when the two best CT means differ less than omega")),
      theta_min_(NewGauge(r, "gravac_policy_theta_min", "Least compression factor")),
      theta_max_(NewGauge(r, "gravac_policy_theta_max", "Most compression factor")),
      throughput_(NewGauge(r, "gravac_throughput_samples_per_second",
                           "System throughput of the latest observed step (samples of the "
                           "whole job / slowest node's step time)")),
      compression_throughput_(
          BuildGauge()
              .Name("gravac_compression_throughput_samples_per_second")
              .Help("Compression throughput (throughput x gain) mean per evaluated theta, from "
                    "the policy's throughput table")
              .Register(r)),
      job_steps_(NewCounter(r, "gravac_job_steps_total",
                            "Combined steps (every node reported) the policy observed")),
      job_step_duration_(BuildHistogram()
                             .Name("gravac_job_step_duration_seconds")
                             .Help("Combined step time (the slowest node's) of observed steps")
                             .Register(r)
                             .Add({}, ExponentialBuckets(0.001, 2, 16))),
      job_sent_bytes_(NewCounter(r, "gravac_job_sent_bytes_total",
                                 "Data-plane bytes the nodes sent, summed per combined step")),
      job_dense_bytes_(NewCounter(r, "gravac_job_dense_equivalent_bytes_total",
                                  "Bytes a dense ring allreduce would have sent, summed over the "
                                  "nodes per combined step")),
      rejected_(BuildCounter()
                    .Name("gravac_stats_rejected_total")
                    .Help("Statistics that did not make an observed step, by reason (entries "
                          "for dropped_by_node, steps otherwise)")
                    .Register(r)) {
  for (StatsRejection reason : kAllStatsRejections) {
    rejected_.Add({{"reason", std::string(StatsRejectionName(reason))}});
  }
}

void ControllerMetrics::OnCreated(int expected_nodes, const JobConfig& job,
                                  const policy::PolicyConfig& policy,
                                  const JobDecision& initial) {
  absl::MutexLock lock(&mu_);
  prometheus::Gauge& info =
      info_.Add({{"version", std::string(GravacVersion())},
                 {"compressor", job.compressor},
                 {"sparse_values", job.sparse_values},
                 {"policy", std::string(policy::ScalingKindName(policy.scaling))}});
  if (info_series_ != nullptr && info_series_ != &info) info_.Remove(info_series_);
  info_series_ = &info;
  info.Set(1);
  expected_nodes_.Set(expected_nodes);
  joined_nodes_.Set(0);
  connected_nodes_.Set(0);
  world_size_.Set(0);
  epsilon_.Set(policy.epsilon);
  omega_.Set(policy.omega);
  theta_min_.Set(policy.theta_min);
  theta_max_.Set(policy.theta_max);
  throughput_.Set(0);
  for (auto& [theta, gauge] : ct_series_) compression_throughput_.Remove(gauge);
  ct_series_.clear();
  SetDecisionGauges(initial);
}

void ControllerMetrics::OnMembership(int joined_nodes, int world_size) {
  joined_nodes_.Set(joined_nodes);
  world_size_.Set(world_size);
}

void ControllerMetrics::OnConnectedNodes(int nodes) { connected_nodes_.Set(nodes); }

void ControllerMetrics::OnDecision(const JobDecision& decision, bool published,
                                   absl::Time when) {
  SetDecisionGauges(decision);
  if (!published) return;
  decisions_.Increment();
  last_decision_time_.Set(absl::ToDoubleSeconds(when - absl::UnixEpoch()));
}

void ControllerMetrics::SetDecisionGauges(const JobDecision& decision) {
  theta_.Set(decision.theta);
  theta_candidate_.Set(decision.theta_candidate);
  decision_epoch_.Set(static_cast<double>(decision.epoch));
  phase_warmup_.Set(decision.phase == policy::PhaseName(policy::Phase::kWarmup) ? 1 : 0);
  phase_searching_.Set(decision.phase == policy::PhaseName(policy::Phase::kSearching) ? 1 : 0);
  phase_done_.Set(decision.phase == policy::PhaseName(policy::Phase::kDone) ? 1 : 0);
  gain_min_.Set(decision.gain_min);
  gain_candidate_.Set(decision.gain_c);
}

void ControllerMetrics::OnStepCombined(int64_t bytes_sent, int64_t bytes_dense) {
  if (bytes_sent > 0) job_sent_bytes_.Increment(static_cast<double>(bytes_sent));
  if (bytes_dense > 0) job_dense_bytes_.Increment(static_cast<double>(bytes_dense));
}

void ControllerMetrics::OnStepObserved(const ObservedStep& step) {
  job_steps_.Increment();
  job_step_duration_.Observe(step.step_seconds);
  throughput_.Set(step.throughput);
  if (step.throughput_table == nullptr) return;
  absl::MutexLock lock(&mu_);
  for (auto it = ct_series_.begin(); it != ct_series_.end();) {
    auto entry = step.throughput_table->find(it->first);
    if (entry != step.throughput_table->end() && entry->second.samples > 0) {
      ++it;
      continue;
    }
    compression_throughput_.Remove(it->second);
    it = ct_series_.erase(it);
  }
  for (const auto& [theta, entry] : *step.throughput_table) {
    if (entry.samples <= 0) continue;
    prometheus::Gauge*& gauge = ct_series_[theta];
    if (gauge == nullptr) gauge = &compression_throughput_.Add({{"theta", ThetaLabel(theta)}});
    gauge->Set(entry.mean());
  }
}

void ControllerMetrics::OnStatsRejected(StatsRejection reason, int64_t count) {
  if (count <= 0) return;
  rejected_.Add({{"reason", std::string(StatsRejectionName(reason))}})
      .Increment(static_cast<double>(count));
}

}  // namespace gravac::controller

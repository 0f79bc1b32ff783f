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

prometheus::Family<prometheus::Gauge>& NewGauge(prometheus::Registry& r, const std::string& name,
                                                const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Counter>& NewCounter(prometheus::Registry& r,
                                                    const std::string& name,
                                                    const std::string& help) {
  return BuildCounter().Name(name).Help(help).Register(r);
}

std::string ThetaLabel(double theta) { return absl::StrFormat("%g", theta); }

using Labels = std::map<std::string, std::string>;

Labels With(Labels base, const std::string& key, const std::string& value) {
  base[key] = value;
  return base;
}

}  // namespace

// One job's series; removed from their families when the job is forgotten.
class JobMetrics final : public CoordinatorObserver {
 public:
  JobMetrics(ControllerMetrics& m, const JobId& id)
      : m_(m),
        labels_{{"job_name", id.name}, {"run_id", id.run_id}},
        expected_nodes_(m.expected_nodes_.Add(labels_)),
        joined_nodes_(m.joined_nodes_.Add(labels_)),
        connected_nodes_(m.connected_nodes_.Add(labels_)),
        world_size_(m.world_size_.Add(labels_)),
        theta_(m.theta_.Add(labels_)),
        theta_candidate_(m.theta_candidate_.Add(labels_)),
        decision_epoch_(m.decision_epoch_.Add(labels_)),
        decisions_(m.decisions_.Add(labels_)),
        last_decision_time_(m.last_decision_time_.Add(labels_)),
        phase_warmup_(m.phase_.Add(With(labels_, "phase", "warmup"))),
        phase_searching_(m.phase_.Add(With(labels_, "phase", "searching"))),
        phase_done_(m.phase_.Add(With(labels_, "phase", "done"))),
        gain_min_(m.gain_.Add(With(labels_, "level", "min"))),
        gain_candidate_(m.gain_.Add(With(labels_, "level", "candidate"))),
        epsilon_(m.epsilon_.Add(labels_)),
        omega_(m.omega_.Add(labels_)),
        theta_min_(m.theta_min_.Add(labels_)),
        theta_max_(m.theta_max_.Add(labels_)),
        throughput_(m.throughput_.Add(labels_)),
        job_steps_(m.job_steps_.Add(labels_)),
        job_step_duration_(
            m.job_step_duration_.Add(labels_, ExponentialBuckets(0.001, 2, 16))),
        job_sent_bytes_(m.job_sent_bytes_.Add(labels_)),
        job_dense_bytes_(m.job_dense_bytes_.Add(labels_)) {
    for (const EnumName<StatsRejection>& entry : kStatsRejections) {
      const StatsRejection reason = entry.value;
      rejected_.push_back(
          &m.rejected_.Add(With(labels_, "reason", std::string(StatsRejectionName(reason)))));
    }
  }

  ~JobMetrics() override {
    absl::MutexLock lock(&mu_);
    if (info_series_ != nullptr) m_.info_.Remove(info_series_);
    for (auto& [theta, gauge] : ct_series_) m_.compression_throughput_.Remove(gauge);
    m_.expected_nodes_.Remove(&expected_nodes_);
    m_.joined_nodes_.Remove(&joined_nodes_);
    m_.connected_nodes_.Remove(&connected_nodes_);
    m_.world_size_.Remove(&world_size_);
    m_.theta_.Remove(&theta_);
    m_.theta_candidate_.Remove(&theta_candidate_);
    m_.decision_epoch_.Remove(&decision_epoch_);
    m_.decisions_.Remove(&decisions_);
    m_.last_decision_time_.Remove(&last_decision_time_);
    for (prometheus::Gauge* g : {&phase_warmup_, &phase_searching_, &phase_done_}) {
      m_.phase_.Remove(g);
    }
    m_.gain_.Remove(&gain_min_);
    m_.gain_.Remove(&gain_candidate_);
    m_.epsilon_.Remove(&epsilon_);
    m_.omega_.Remove(&omega_);
    m_.theta_min_.Remove(&theta_min_);
    m_.theta_max_.Remove(&theta_max_);
    m_.throughput_.Remove(&throughput_);
    m_.job_steps_.Remove(&job_steps_);
    m_.job_step_duration_.Remove(&job_step_duration_);
    m_.job_sent_bytes_.Remove(&job_sent_bytes_);
    m_.job_dense_bytes_.Remove(&job_dense_bytes_);
    for (prometheus::Counter* c : rejected_) m_.rejected_.Remove(c);
  }

  void OnCreated(int expected_nodes, const JobConfig& job, const policy::PolicyConfig& policy,
                 const JobDecision& initial) override {
    absl::MutexLock lock(&mu_);
    Labels info_labels = labels_;
    info_labels["version"] = std::string(GravacVersion());
    info_labels["compressor"] = job.compressor;
    info_labels["sparse_values"] = job.sparse_values;
    info_labels["policy"] = std::string(policy::ScalingKindName(policy.scaling));
    prometheus::Gauge& info = m_.info_.Add(info_labels);
    if (info_series_ != nullptr && info_series_ != &info) m_.info_.Remove(info_series_);
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
    for (auto& [theta, gauge] : ct_series_) m_.compression_throughput_.Remove(gauge);
    ct_series_.clear();
    SetDecisionGauges(initial);
  }

  void OnMembership(int joined_nodes, int world_size) override {
    joined_nodes_.Set(joined_nodes);
    world_size_.Set(world_size);
  }

  void OnConnectedNodes(int nodes) override { connected_nodes_.Set(nodes); }

  void OnDecision(const JobDecision& decision, bool published, absl::Time when) override {
    SetDecisionGauges(decision);
    if (!published) return;
    decisions_.Increment();
    last_decision_time_.Set(absl::ToDoubleSeconds(when - absl::UnixEpoch()));
  }

  void OnStepCombined(int64_t bytes_sent, int64_t bytes_dense) override {
    if (bytes_sent > 0) job_sent_bytes_.Increment(static_cast<double>(bytes_sent));
    if (bytes_dense > 0) job_dense_bytes_.Increment(static_cast<double>(bytes_dense));
  }

  void OnStepObserved(const ObservedStep& step) override {
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
      m_.compression_throughput_.Remove(it->second);
      it = ct_series_.erase(it);
    }
    for (const auto& [theta, entry] : *step.throughput_table) {
      if (entry.samples <= 0) continue;
      prometheus::Gauge*& gauge = ct_series_[theta];
      if (gauge == nullptr) {
        gauge = &m_.compression_throughput_.Add(With(labels_, "theta", ThetaLabel(theta)));
      }
      gauge->Set(entry.mean());
    }
  }

  void OnStatsRejected(StatsRejection reason, int64_t count) override {
    if (count <= 0) return;
    m_.rejected_.Add(With(labels_, "reason", std::string(StatsRejectionName(reason))))
        .Increment(static_cast<double>(count));
  }

 private:
  void SetDecisionGauges(const JobDecision& decision) {
    theta_.Set(decision.theta);
    theta_candidate_.Set(decision.theta_candidate);
    decision_epoch_.Set(static_cast<double>(decision.epoch));
    phase_warmup_.Set(decision.phase == policy::PhaseName(policy::Phase::kWarmup) ? 1 : 0);
    phase_searching_.Set(decision.phase == policy::PhaseName(policy::Phase::kSearching) ? 1 : 0);
    phase_done_.Set(decision.phase == policy::PhaseName(policy::Phase::kDone) ? 1 : 0);
    gain_min_.Set(decision.gain_min);
    gain_candidate_.Set(decision.gain_c);
  }

  ControllerMetrics& m_;
  const Labels labels_;
  prometheus::Gauge& expected_nodes_;
  prometheus::Gauge& joined_nodes_;
  prometheus::Gauge& connected_nodes_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& theta_;
  prometheus::Gauge& theta_candidate_;
  prometheus::Gauge& decision_epoch_;
  prometheus::Counter& decisions_;
  prometheus::Gauge& last_decision_time_;
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
  prometheus::Counter& job_steps_;
  prometheus::Histogram& job_step_duration_;
  prometheus::Counter& job_sent_bytes_;
  prometheus::Counter& job_dense_bytes_;
  std::vector<prometheus::Counter*> rejected_;

  absl::Mutex mu_;
  prometheus::Gauge* info_series_ ABSL_GUARDED_BY(mu_) = nullptr;
  // One CT series per θ in the policy's table (removed when the table no longer has it).
  std::map<double, prometheus::Gauge*> ct_series_ ABSL_GUARDED_BY(mu_);
};

std::string_view GravacVersion() { return GRAVAC_VERSION; }

ControllerMetrics::ControllerMetrics(prometheus::Registry& r)
    : info_(BuildGauge()
                .Name("gravac_controller_info")
                .Help("gravac-controller identity and a job's configuration (always 1)")
                .Register(r)),
      expected_nodes_(NewGauge(r, "gravac_expected_nodes", "Daemons the job expects to join")),
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
      phase_(NewGauge(r, "gravac_search_phase",
                      "GraVAC search state: the series of the current phase is 1, the others 0")),
      gain_(NewGauge(r, "gravac_compression_gain",
                     "Compression gain of the decision in force at theta_min (level=min) and at "
                     "the candidate theta_c (level=candidate)")),
      epsilon_(NewGauge(r, "gravac_policy_epsilon", "Least acceptable compression gain epsilon")),
      omega_(NewGauge(r, "gravac_policy_omega",
                      "The search stops when the two best CT means differ less than omega")),
      theta_min_(NewGauge(r, "gravac_policy_theta_min", "Least compression factor")),
      theta_max_(NewGauge(r, "gravac_policy_theta_max", "Most compression factor")),
      throughput_(NewGauge(r, "gravac_throughput_samples_per_second",
                           "System throughput of the latest observed step (samples of the "
                           "whole job / slowest node's step time)")),
      compression_throughput_(
          NewGauge(r, "gravac_compression_throughput_samples_per_second",
                   "Compression throughput (throughput x gain) mean per evaluated theta, from "
                   "the policy's throughput table")),
      job_steps_(NewCounter(r, "gravac_job_steps_total",
                            "Combined steps (every node reported) the policy observed")),
      job_step_duration_(BuildHistogram()
                             .Name("gravac_job_step_duration_seconds")
                             .Help("Combined step time (the slowest node's) of observed steps")
                             .Register(r)),
      job_sent_bytes_(NewCounter(r, "gravac_job_sent_bytes_total",
                                 "Data-plane bytes the nodes sent, summed per combined step")),
      job_dense_bytes_(NewCounter(r, "gravac_job_dense_equivalent_bytes_total",
                                  "Bytes a dense ring allreduce would have sent, summed over the "
                                  "nodes per combined step")),
      rejected_(NewCounter(r, "gravac_stats_rejected_total",
                           "Statistics that did not make an observed step, by reason (entries "
                           "for dropped_by_node, steps otherwise)")) {}

std::unique_ptr<CoordinatorObserver> ControllerMetrics::ForJob(const JobId& id) {
  return std::make_unique<JobMetrics>(*this, id);
}

}  // namespace gravac::controller

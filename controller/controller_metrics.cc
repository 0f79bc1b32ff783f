// ControllerMetrics: the controller's metric families and their updates per Coordinator event.
#include "controller/controller_metrics.h"

#include <functional>
#include <utility>
#include <vector>

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

constexpr policy::Phase kPhases[] = {policy::Phase::kWarmup, policy::Phase::kSearching,
                                     policy::Phase::kDone};

std::string ThetaLabel(double theta) { return absl::StrFormat("%g", theta); }

using Labels = std::map<std::string, std::string>;

Labels With(Labels base, const std::string& key, const std::string& value) {
  base[key] = value;
  return base;
}

// The series one job adds to the controller's families. Each is removed from its family when
// the JobSeries goes, so adding a job's series and removing it have one owner.
class JobSeries {
 public:
  explicit JobSeries(const Labels& job) : job_(job) {}
  ~JobSeries() {
    for (auto& remove : removers_) remove();
  }
  JobSeries(const JobSeries&) = delete;
  JobSeries& operator=(const JobSeries&) = delete;

  // Adds the series of `family` with the job's labels and `extra` (it exists from now on, at 0);
  // `args` go to Family::Add (a histogram's buckets).
  template <typename T, typename... Args>
  T& Add(prometheus::Family<T>& family, const Labels& extra = {}, Args&&... args) {
    T& series = family.Add(With(extra), std::forward<Args>(args)...);
    removers_.push_back([&family, &series] { family.Remove(&series); });
    return series;
  }
  // The series Add added to `family` with `extra` (a gauge or counter).
  template <typename T>
  T& Of(prometheus::Family<T>& family, const Labels& extra = {}) const {
    return family.Add(With(extra));
  }

 private:
  Labels With(const Labels& extra) const {
    Labels labels = job_;
    labels.insert(extra.begin(), extra.end());
    return labels;
  }

  const Labels& job_;
  std::vector<std::function<void()>> removers_;
};

}  // namespace

// One job's series; removed from their families when the job is forgotten.
class JobMetrics final : public CoordinatorObserver {
 public:
  JobMetrics(ControllerMetrics& m, const JobId& id)
      : m_(m), labels_{{"job_name", id.name}, {"run_id", id.run_id}} {
    // Every series exists from the start, at 0.
    for (auto* gauges : {&m.expected_nodes_, &m.joined_nodes_, &m.connected_nodes_, &m.world_size_,
                         &m.theta_, &m.theta_candidate_, &m.decision_epoch_, &m.last_decision_time_,
                         &m.epsilon_, &m.omega_, &m.theta_min_, &m.theta_max_, &m.throughput_}) {
      series_.Add(*gauges);
    }
    for (auto* counters : {&m.decisions_, &m.job_steps_, &m.job_sent_bytes_, &m.job_dense_bytes_}) {
      series_.Add(*counters);
    }
    for (policy::Phase phase : kPhases) {
      series_.Add(m.phase_, {{"phase", std::string(policy::PhaseName(phase))}});
    }
    for (std::string level : {"min", "candidate"}) series_.Add(m.gain_, {{"level", level}});
    for (const EnumName<StatsRejection>& entry : kStatsRejections) {
      series_.Add(m.rejected_, {{"reason", std::string(StatsRejectionName(entry.value))}});
    }
  }

  ~JobMetrics() override {  // series_ removes the fixed series after this
    absl::MutexLock lock(&mu_);
    if (info_series_ != nullptr) m_.info_.Remove(info_series_);
    for (auto& [theta, gauge] : ct_series_) m_.compression_throughput_.Remove(gauge);
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
    series_.Of(m_.expected_nodes_).Set(expected_nodes);
    series_.Of(m_.joined_nodes_).Set(0);
    series_.Of(m_.connected_nodes_).Set(0);
    series_.Of(m_.world_size_).Set(0);
    series_.Of(m_.epsilon_).Set(policy.epsilon);
    series_.Of(m_.omega_).Set(policy.omega);
    series_.Of(m_.theta_min_).Set(policy.theta_min);
    series_.Of(m_.theta_max_).Set(policy.theta_max);
    series_.Of(m_.throughput_).Set(0);
    for (auto& [theta, gauge] : ct_series_) m_.compression_throughput_.Remove(gauge);
    ct_series_.clear();
    SetDecisionGauges(initial);
  }

  void OnMembership(int joined_nodes, int world_size) override {
    series_.Of(m_.joined_nodes_).Set(joined_nodes);
    series_.Of(m_.world_size_).Set(world_size);
  }

  void OnConnectedNodes(int nodes) override { series_.Of(m_.connected_nodes_).Set(nodes); }

  void OnDecision(const JobDecision& decision, bool published, absl::Time when) override {
    SetDecisionGauges(decision);
    if (!published) return;
    series_.Of(m_.decisions_).Increment();
    series_.Of(m_.last_decision_time_).Set(absl::ToDoubleSeconds(when - absl::UnixEpoch()));
  }

  void OnStepCombined(int64_t bytes_sent, int64_t bytes_dense) override {
    if (bytes_sent > 0) series_.Of(m_.job_sent_bytes_).Increment(static_cast<double>(bytes_sent));
    if (bytes_dense > 0)
      series_.Of(m_.job_dense_bytes_).Increment(static_cast<double>(bytes_dense));
  }

  void OnStepObserved(const ObservedStep& step) override {
    series_.Of(m_.job_steps_).Increment();
    job_step_duration_.Observe(step.step_seconds);
    series_.Of(m_.throughput_).Set(step.throughput);
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
    series_.Of(m_.rejected_, {{"reason", std::string(StatsRejectionName(reason))}})
        .Increment(static_cast<double>(count));
  }

 private:
  void SetDecisionGauges(const JobDecision& decision) {
    series_.Of(m_.theta_).Set(decision.theta);
    series_.Of(m_.theta_candidate_).Set(decision.theta_candidate);
    series_.Of(m_.decision_epoch_).Set(static_cast<double>(decision.epoch));
    for (policy::Phase phase : kPhases) {
      const std::string name(policy::PhaseName(phase));
      series_.Of(m_.phase_, {{"phase", name}}).Set(decision.phase == name ? 1 : 0);
    }
    series_.Of(m_.gain_, {{"level", "min"}}).Set(decision.gain_min);
    series_.Of(m_.gain_, {{"level", "candidate"}}).Set(decision.gain_c);
  }

  ControllerMetrics& m_;
  const Labels labels_;
  JobSeries series_{labels_};
  prometheus::Histogram& job_step_duration_ =
      series_.Add(m_.job_step_duration_, {}, ExponentialBuckets(0.001, 2, 16));

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

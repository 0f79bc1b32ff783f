// Coordinator: combining the nodes' statistics per step and feeding the combined steps to the
// policy (its decisions are published by coordinator_decisions.cc).
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "controller/coordinator.h"

namespace gravac::controller {
namespace {

bool Finite(double v) { return std::isfinite(v) && v >= 0.0; }

}  // namespace

absl::Status Coordinator::ReportStats(const NodeStepStats& stats, int64_t dropped) {
  absl::MutexLock lock(&mu_);
  const int nodes = static_cast<int>(nodes_.size());
  if (stats.node_rank < 0 || stats.node_rank >= nodes) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "stats: node rank %d is not part of the job (%d nodes assembled); join first",
        stats.node_rank, nodes));
  }
  if (stats.step < 0 || !Finite(stats.n_g) || !Finite(stats.n_min) || !Finite(stats.n_c) ||
      !Finite(stats.step_seconds) || !Finite(stats.theta_used) || !Finite(stats.theta_candidate) ||
      stats.samples < 0 || stats.bytes_sent < 0 || stats.bytes_dense < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "stats: node %d step %d: a field is negative or not finite (step, norms, step_seconds, "
        "theta, samples, bytes)",
        stats.node_rank, stats.step));
  }
  NodeStatusInfo& status = node_status_[stats.node_rank];
  status.last_step = std::max(status.last_step, stats.step);
  status.stats_dropped += std::max<int64_t>(dropped, 0);
  NotifyRejected(StatsRejection::kDroppedByNode, dropped);
  if (stats.step <= last_observed_) return absl::OkStatus();  // too late to be observed

  PendingStep& p = pending_[stats.step];
  if (p.reported.empty()) {
    p.reported.assign(nodes, false);
    p.sum = stats;
    p.sum.node_rank = -1;
  } else {
    if (p.reported[stats.node_rank]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("stats: node %d reported step %d twice", stats.node_rank, stats.step));
    }
    if (p.sum.theta_used != stats.theta_used || p.sum.theta_candidate != stats.theta_candidate) {
      p.theta_mismatch = true;
    }
    p.sum.n_g += stats.n_g;
    p.sum.n_min += stats.n_min;
    p.sum.n_c += stats.n_c;
    p.sum.step_seconds = std::max(p.sum.step_seconds, stats.step_seconds);
    p.sum.samples += stats.samples;
    p.sum.bytes_sent += stats.bytes_sent;
    p.sum.bytes_dense += stats.bytes_dense;
    p.sum.decision_epoch = std::min(p.sum.decision_epoch, stats.decision_epoch);
  }
  p.reported[stats.node_rank] = true;
  ++p.count;

  if (p.count == nodes) {
    PendingStep complete = std::move(p);
    const int64_t step = stats.step;
    // Every older pending step can no longer be observed (the policy needs increasing steps).
    int64_t evicted = 0;
    for (auto it = pending_.begin(); it != pending_.end() && it->first <= step;) {
      if (it->first < step) ++evicted;
      it = pending_.erase(it);
    }
    steps_incomplete_ += evicted;
    NotifyRejected(StatsRejection::kIncompleteEvicted, evicted);
    ObserveStep(step, complete);
  } else if (pending_.size() > options_.max_pending_steps) {
    ++steps_incomplete_;
    NotifyRejected(StatsRejection::kIncompleteEvicted, 1);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kWarning,
                 "stats: step %d dropped: not every node reported it within %d pending steps",
                 pending_.begin()->first, static_cast<int>(options_.max_pending_steps));
    }
    pending_.erase(pending_.begin());
  }
  return absl::OkStatus();
}

void Coordinator::ObserveStep(int64_t step, const PendingStep& pending) {
  last_observed_ = step;
  const NodeStepStats& sum = pending.sum;
  bytes_sent_ += sum.bytes_sent;
  bytes_dense_ += sum.bytes_dense;
  if (options_.observer != nullptr) {
    options_.observer->OnStepCombined(sum.bytes_sent, sum.bytes_dense);
  }
  if (pending.theta_mismatch) {
    ++steps_rejected_;
    NotifyRejected(StatsRejection::kThetaDisagrees, 1);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kError,
                 "stats: step %d refused: the nodes report different theta_used/theta_candidate "
                 "(invariant 1 broken)",
                 step);
    }
    return;
  }
  if (epoch_base_ > 0 && sum.decision_epoch <= epoch_base_) {
    // Executed under the previous controller's decisions (queued while it was away): its θ and
    // candidate belong to that controller's search, not to this policy's.
    ++steps_rejected_;
    NotifyRejected(StatsRejection::kOldEpoch, 1);
    return;
  }
  policy::StepStats combined;
  combined.step = step;
  combined.theta_used = sum.theta_used;
  combined.theta_candidate = sum.theta_candidate;
  combined.n_g = sum.n_g;
  combined.n_min = sum.n_min;
  combined.n_c = sum.n_c;
  combined.step_seconds = sum.step_seconds;
  combined.samples = sum.samples > 0 ? sum.samples : world_size_;
  absl::StatusOr<policy::Decision> decision = policy_.Observe(combined);
  if (!decision.ok()) {
    ++steps_rejected_;
    NotifyRejected(StatsRejection::kPolicyRefused, 1);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kWarning, "stats: step %d refused by the policy: %s", step,
                 decision.status().ToString());
    }
    return;
  }
  if (const std::optional<policy::PeriodReport>& period = policy_.ended_period();
      period && options_.log != nullptr) {
    // Each candidate's measured gains against ε and the guard: why its θ was used or not.
    GRAVAC_LOG(*options_.log, kInfo, "%s",
               period->DebugString(policy_.config().epsilon, policy_.config().min_relative_gain));
  }
  sum_samples_ += static_cast<double>(combined.samples);
  sum_seconds_ += combined.step_seconds;
  last_step_seconds_ = combined.step_seconds;
  last_throughput_ = static_cast<double>(combined.samples) / combined.step_seconds;
  if (options_.observer != nullptr) {
    options_.observer->OnStepObserved(
        {step, combined.step_seconds, last_throughput_, &policy_.throughput_table().entries()});
  }
  if (decision->epoch != policy_epoch_) {
    policy_epoch_ = decision->epoch;
    Publish(FromPolicy(*decision, current_.epoch + 1));
  } else {
    current_.gain_min = decision->gain_min;
    current_.gain_c = decision->gain_c;
    if (options_.observer != nullptr) options_.observer->OnDecision(current_, false, absl::Now());
  }
}

}  // namespace gravac::controller

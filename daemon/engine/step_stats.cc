#include "daemon/engine/step_stats.h"

#include <algorithm>
#include <iterator>

#include "absl/time/clock.h"

namespace gravac::daemon::internal {

StepStatsAccumulator::Step* StepStatsAccumulator::For(int64_t step, const JobDecision& decision,
                                                      int64_t start_ns, int64_t samples) {
  if (step < 0 || step <= last_reported_step_) return nullptr;
  ReportBefore(step);
  auto [it, inserted] = steps_.try_emplace(step);
  Step& st = it->second;
  if (inserted) {
    st.stats.node_rank = node_rank_;
    st.stats.step = step;
    st.stats.theta_used = 1.0;
    st.stats.theta_candidate = decision.theta_candidate;
    st.stats.decision_epoch = decision.epoch;
    st.first_ns = start_ns;
  }
  st.first_ns = std::min(st.first_ns, start_ns);
  st.last_ns = absl::GetCurrentTimeNanos();
  st.stats.samples = std::max(st.stats.samples, samples);
  return &st;
}

void StepStatsAccumulator::AddNorms(Step* step, double grad_norm, double norm_min,
                                    double norm_candidate) const {
  if (step == nullptr) return;
  auto norm = [this](double l2) { return global_norm_ ? l2 * l2 : l2; };
  step->stats.n_g += norm(grad_norm);
  step->stats.n_min += norm(norm_min);
  step->stats.n_c += norm(norm_candidate);
}

void StepStatsAccumulator::ReportBefore(int64_t step) {
  while (!steps_.empty() && steps_.begin()->first < step) {
    auto it = steps_.begin();
    auto next = std::next(it);
    const int64_t end_ns = next != steps_.end() ? next->second.first_ns : it->second.last_ns;
    NodeStepStats s = it->second.stats;
    s.step_seconds = std::max<int64_t>(0, end_ns - it->second.first_ns) * 1e-9;
    last_reported_step_ = std::max(last_reported_step_, it->first);
    steps_.erase(it);
    if (sink_ != nullptr) sink_->Report(s);
  }
}

}  // namespace gravac::daemon::internal

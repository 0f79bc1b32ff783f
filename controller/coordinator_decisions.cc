// Coordinator: decisions (the policy's decision as a JobDecision, publication with epochs) and
// their fan-out to the subscribed decision streams, with the delay hook.
#include "controller/coordinator.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace gravac::controller {
namespace {

// A gain as the decision log shows it. The policy reports 0 while a gain is undefined (its
// trackers still filling: warm-up, or a candidate that has just changed), which is no measurement.
std::string GainText(double gain) {
  return gain > 0.0 ? absl::StrFormat("%.3f", gain) : "not measured yet";
}

}  // namespace

JobDecision Coordinator::FromPolicy(const policy::Decision& d, int64_t epoch) const {
  JobDecision out;
  out.epoch = epoch;
  out.first_step = d.first_step;
  out.theta = d.theta;
  out.theta_candidate = d.theta_candidate;
  out.searching = d.searching;
  out.phase = std::string(policy::PhaseName(d.phase));
  out.gain_min = d.gain_min;
  out.gain_c = d.gain_c;
  return out;
}

void Coordinator::Publish(const JobDecision& decision) {
  current_ = decision;
  if (options_.observer != nullptr) options_.observer->OnDecision(decision, true, absl::Now());
  if (options_.log != nullptr) {
    GRAVAC_LOG(*options_.log, kInfo,
               "decision epoch %d from step %d: theta %g theta_c %g phase %s%s gain_min %s "
               "gain_c %s",
               decision.epoch, decision.first_step, decision.theta, decision.theta_candidate,
               decision.phase, decision.searching ? " (searching)" : "",
               GainText(decision.gain_min), GainText(decision.gain_c));
  }
  for (const auto& [id, sub] : subscriptions_) Deliver(id, sub, decision);
}

absl::StatusOr<int64_t> Coordinator::Subscribe(int node_rank, DecisionSubscriber* subscriber) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("watch: the controller is shutting down");
  if (node_rank < 0 || node_rank >= static_cast<int>(nodes_.size())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "watch: node rank %d is not part of the job (%d nodes assembled); join first", node_rank,
        static_cast<int>(nodes_.size())));
  }
  const int64_t id = next_subscription_++;
  Subscription sub{node_rank, subscriber};
  subscriptions_[id] = sub;
  NotifyConnected();
  Deliver(id, sub, current_);
  return id;
}

void Coordinator::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&mu_);
  if (subscriptions_.erase(id) > 0) NotifyConnected();
  std::erase_if(delayed_, [id](const DelayedDelivery& d) { return d.subscription == id; });
}

void Coordinator::Deliver(int64_t id, const Subscription& sub, const JobDecision& decision) {
  auto delay = options_.decision_delay.find(sub.node_rank);
  if (delay != options_.decision_delay.end() && delay->second > absl::ZeroDuration()) {
    delayed_.push_back({absl::Now() + delay->second, id, decision});
    return;
  }
  sub.subscriber->OnDecision(decision);
}

void Coordinator::DeliverDue(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<DelayedDelivery> keep;
  for (DelayedDelivery& d : delayed_) {
    if (d.due > now) {
      keep.push_back(std::move(d));
      continue;
    }
    auto it = subscriptions_.find(d.subscription);
    if (it != subscriptions_.end()) it->second.subscriber->OnDecision(d.decision);
  }
  delayed_ = std::move(keep);
}

std::optional<absl::Time> Coordinator::NextDelivery() const {
  absl::MutexLock lock(&mu_);
  std::optional<absl::Time> next;
  for (const DelayedDelivery& d : delayed_) {
    if (!next || d.due < *next) next = d.due;
  }
  return next;
}

}  // namespace gravac::controller

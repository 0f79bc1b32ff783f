// Coordinator: creation, observer notifications, shutdown and status. The rest is split by idea:
// join rounds (coordinator_join.cc), per-step combination of the statistics
// (coordinator_stats.cc), decisions and their fan-out (coordinator_decisions.cc).
#include "controller/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/absl_compat.h"

namespace gravac::controller {

absl::Status CheckSparseValues(std::string_view value) {
  if (value == "fp32" || value == "fp16" || value == "bf16") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("sparse_values: '", AsAbsl(value), "' is not one of fp32, fp16, bf16"));
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorOptions options) {
  if (options.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nodes: must be >= 1, got ", options.nodes));
  }
  if (absl::Status s = CheckSparseValues(options.sparse_values); !s.ok()) return s;
  if (options.max_pending_steps < 1) {
    return absl::InvalidArgumentError("max_pending_steps: must be >= 1");
  }
  for (const auto& [node, delay] : options.decision_delay) {
    if (node >= options.nodes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "decision_delay: node %d does not exist (the job has %d nodes)", node, options.nodes));
    }
  }
  auto policy = policy::GravacPolicy::Create(options.policy);
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<Coordinator>(
      new Coordinator(std::move(options), std::move(policy).value()));
}

Coordinator::Coordinator(CoordinatorOptions options, policy::GravacPolicy policy)
    : options_(std::move(options)), policy_(std::move(policy)) {
  current_ = FromPolicy(policy_.current(), 0);
  if (CoordinatorObserver* o = options_.observer; o != nullptr) {
    o->OnCreated(options_.nodes, MakeJobConfig(), options_.policy, current_);
    o->OnMembership(0, 0);
    o->OnConnectedNodes(0);
  }
}

void Coordinator::NotifyMembership() const {
  if (options_.observer == nullptr) return;
  if (nodes_.empty()) {
    options_.observer->OnMembership(static_cast<int>(joiners_.size()), 0);
  } else {
    options_.observer->OnMembership(static_cast<int>(nodes_.size()), world_size_);
  }
}

void Coordinator::NotifyConnected() const {
  if (options_.observer == nullptr) return;
  std::vector<int> ranks;
  for (const auto& [id, sub] : subscriptions_) ranks.push_back(sub.node_rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  options_.observer->OnConnectedNodes(static_cast<int>(ranks.size()));
}

void Coordinator::NotifyRejected(StatsRejection reason, int64_t count) const {
  if (options_.observer != nullptr && count > 0) options_.observer->OnStatsRejected(reason, count);
}

JobConfig Coordinator::MakeJobConfig() const {
  JobConfig job;
  job.compressor = options_.compressor;
  job.sparse_values = options_.sparse_values;
  job.theta_min = options_.policy.theta_min;
  job.theta_max = options_.policy.theta_max;
  job.job_seed = options_.job_seed;
  job.global_norm = options_.policy.norm_mode == policy::NormMode::kGlobalSquaredL2;
  return job;
}

bool Coordinator::assembled() const {
  absl::MutexLock lock(&mu_);
  return !nodes_.empty();
}

std::optional<std::string> Coordinator::NodeName(int node_rank) const {
  absl::MutexLock lock(&mu_);
  for (const NodeEntry& n : nodes_) {
    if (n.node_rank == node_rank) return n.node_name;
  }
  return std::nullopt;
}

void Coordinator::Shutdown() {
  End(absl::UnavailableError("join: the controller is shutting down"),
      absl::UnavailableError("the controller is shutting down"));
}

void Coordinator::Fail(const absl::Status& reason) { End(reason, reason); }

void Coordinator::End(const absl::Status& joins, const absl::Status& streams) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  FailRound(joins);
  std::map<int64_t, Subscription> subs = std::move(subscriptions_);
  subscriptions_.clear();
  delayed_.clear();
  NotifyConnected();
  for (auto& [id, sub] : subs) sub.subscriber->OnEnd(streams);
}

JobDecision Coordinator::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

JobStatusInfo Coordinator::Status() const {
  absl::MutexLock lock(&mu_);
  JobStatusInfo s;
  s.assembled = !nodes_.empty();
  s.expected_nodes = options_.nodes;
  s.job = MakeJobConfig();
  s.decision = current_;
  if (s.assembled) {
    s.joined_nodes = static_cast<int>(nodes_.size());
    s.world_size = world_size_;
    s.nodes = node_status_;
    for (const auto& [id, sub] : subscriptions_) s.nodes[sub.node_rank].watching = true;
  } else {
    s.joined_nodes = static_cast<int>(joiners_.size());
    for (const Joiner& j : joiners_) {
      const JoinRequestInfo& r = j.request;
      s.world_size = r.world_size;
      s.nodes.push_back(
          {{-1, r.node_name, r.first_rank, r.local_count, r.transport_address}, false, -1, 0});
    }
  }
  s.steps_observed = policy_.observed_steps();
  s.last_step = last_observed_;
  s.throughput = last_throughput_;
  s.mean_throughput = sum_seconds_ > 0 ? sum_samples_ / sum_seconds_ : 0.0;
  s.last_step_seconds = last_step_seconds_;
  s.bytes_sent = bytes_sent_;
  s.bytes_dense = bytes_dense_;
  for (const auto& [theta, entry] : policy_.throughput_table().entries()) {
    s.throughput_table.emplace_back(theta, entry);
  }
  s.steps_incomplete = steps_incomplete_;
  s.steps_rejected = steps_rejected_;
  s.epoch_base = epoch_base_;
  return s;
}

}  // namespace gravac::controller

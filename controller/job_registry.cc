#include "controller/job_registry.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gravac::controller {

struct JobRegistry::Handle {
  std::unique_ptr<CoordinatorObserver> observer;  // destroyed after the coordinator
  std::unique_ptr<Coordinator> coordinator;
};

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kAssembling:
      return "assembling";
    case JobState::kRunning:
      return "running";
    case JobState::kEnded:
      return "ended";
    case JobState::kFailed:
      return "failed";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<JobRegistry>> JobRegistry::Create(JobRegistryOptions options) {
  options.coordinator.observer = nullptr;
  // The same checks every job's Coordinator will pass.
  absl::StatusOr<std::unique_ptr<Coordinator>> probe = Coordinator::Create(options.coordinator);
  if (!probe.ok()) return probe.status();
  if (options.retention <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("job_retention: must be > 0");
  }
  return std::unique_ptr<JobRegistry>(new JobRegistry(std::move(options)));
}

JobRegistry::~JobRegistry() { Shutdown(); }

void JobRegistry::RememberEnded(const JobId& id) {
  if (!ended_ids_.insert(id).second) return;
  ended_order_.push_back(id);
  while (ended_order_.size() > std::max<size_t>(options_.max_ended_ids, 1)) {
    ended_ids_.erase(ended_order_.front());
    failures_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

absl::StatusOr<std::shared_ptr<Coordinator>> JobRegistry::ForJoin(const JobId& raw, int nodes) {
  const JobId id = raw.Normalized();
  if (absl::Status s = CheckJobId(id); !s.ok()) return s;
  if (nodes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: nodes must be >= 0, got %d", id.ToString(), nodes));
  }
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("join: the controller is shutting down");
  auto it = jobs_.find(id);
  if (auto failed = failures_.find(id); failed != failures_.end()) {
    return absl::AbortedError(failed->second);
  }
  if (it != jobs_.end() && it->second.ended.has_value()) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "%s ended at %s%s; a rerun needs a new run id", id.ToString(),
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", *it->second.ended, absl::UTCTimeZone()),
        it->second.abandoned ? " (abandoned: no daemon stayed connected)" : ""));
  }
  if (it == jobs_.end() && ended_ids_.count(id) > 0) {
    return absl::AlreadyExistsError(
        absl::StrFormat("%s already ended; a rerun needs a new run id", id.ToString()));
  }
  const int want = nodes > 0 ? nodes : options_.coordinator.nodes;
  if (it != jobs_.end()) {
    if (want != it->second.nodes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has %d nodes, but this daemon says %d", id.ToString(), it->second.nodes, want));
    }
    return it->second.coordinator;
  }
  auto handle = std::make_shared<Handle>();
  CoordinatorOptions copts = options_.coordinator;
  copts.nodes = want;
  for (auto d = copts.decision_delay.begin(); d != copts.decision_delay.end();) {
    d = d->first >= want ? copts.decision_delay.erase(d) : std::next(d);
  }
  if (options_.observers) handle->observer = options_.observers(id);
  copts.observer = handle->observer.get();
  absl::StatusOr<std::unique_ptr<Coordinator>> made = Coordinator::Create(std::move(copts));
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrFormat("%s: %s", id.ToString(), made.status().message()));
  }
  handle->coordinator = *std::move(made);
  Job job;
  job.coordinator = std::shared_ptr<Coordinator>(handle, handle->coordinator.get());
  job.handle = std::move(handle);
  job.nodes = want;
  job.started = absl::Now();
  if (options_.coordinator.log != nullptr) {
    GRAVAC_LOG(*options_.coordinator.log, kInfo, "%s: new job of %d nodes", id.ToString(), want);
  }
  return jobs_.emplace(id, std::move(job)).first->second.coordinator;
}

absl::StatusOr<std::shared_ptr<Coordinator>> JobRegistry::Find(const JobId& raw) const {
  const JobId id = raw.Normalized();
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is not known to this controller; join it first", id.ToString()));
  }
  if (it->second.ended.has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat("%s has ended", id.ToString()));
  }
  return it->second.coordinator;
}

absl::StatusOr<bool> JobRegistry::Leave(const JobId& raw, int node_rank) {
  const JobId id = raw.Normalized();
  std::shared_ptr<Coordinator> ending;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("leave: %s is not known to this controller", id.ToString()));
    }
    Job& job = it->second;
    if (job.ended.has_value()) return true;
    if (node_rank < 0 || node_rank >= job.nodes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "leave: %s has no node %d (it has %d)", id.ToString(), node_rank, job.nodes));
    }
    job.left.insert(node_rank);
    if (static_cast<int>(job.left.size()) < job.nodes) return false;
    job.ended = absl::Now();
    RememberEnded(id);
    ending = job.coordinator;
  }
  if (options_.coordinator.log != nullptr) {
    const JobStatusInfo s = ending->Status();
    GRAVAC_LOG(*options_.coordinator.log, kInfo,
               "%s ended: %d steps observed, last step %d, decision epoch %d theta %g",
               id.ToString(), static_cast<int>(s.steps_observed), s.last_step, s.decision.epoch,
               s.decision.theta);
  }
  ending->Shutdown();
  return true;
}

absl::StatusOr<bool> JobRegistry::Fail(const JobId& raw, const std::string& node_name,
                                       int node_rank, const std::string& reason) {
  const JobId id = raw.Normalized();
  if (absl::Status s = CheckJobId(id); !s.ok()) return s;
  const std::string failure = absl::StrFormat(
      "%s failed on node '%s'%s: %s", id.ToString(), node_name,
      node_rank >= 0 ? absl::StrFormat(" (node rank %d)", node_rank) : "", reason);
  std::shared_ptr<Coordinator> failing;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (ended_ids_.count(id) > 0 || (it != jobs_.end() && it->second.ended.has_value())) {
      return false;
    }
    RememberEnded(id);
    failures_[id] = failure;
    if (it != jobs_.end()) {
      it->second.ended = absl::Now();
      it->second.failure = failure;
      failing = it->second.coordinator;
    } else {
      unjoined_failures_[id] = absl::Now();
    }
  }
  if (options_.coordinator.log != nullptr) {
    GRAVAC_LOG(*options_.coordinator.log, kWarning, "%s", failure);
  }
  if (failing != nullptr) failing->Fail(absl::AbortedError(failure));
  return true;
}

void JobRegistry::Tick(absl::Time now) {
  std::vector<std::pair<JobId, std::shared_ptr<Coordinator>>> live;
  std::vector<std::shared_ptr<Handle>> forgotten;  // released outside the lock
  {
    absl::MutexLock lock(&mu_);
    std::erase_if(unjoined_failures_, [&](const auto& entry) {
      return now - entry.second > options_.retention;
    });
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->second.ended.has_value()) {
        if (now - *it->second.ended > options_.retention) {
          forgotten.push_back(std::move(it->second.handle));
          it = jobs_.erase(it);
          continue;
        }
      } else {
        live.emplace_back(it->first, it->second.coordinator);
      }
      ++it;
    }
  }
  for (auto& [id, coordinator] : live) {
    coordinator->ExpireJoins(now);
    coordinator->DeliverDue(now);
    const JobStatusInfo s = coordinator->Status();
    const bool idle =
        s.joined_nodes == 0 || std::none_of(s.nodes.begin(), s.nodes.end(),
                                            [](const NodeStatusInfo& n) { return n.watching; });
    bool abandon = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.ended.has_value()) continue;
      Job& job = it->second;
      if (!idle || (!s.assembled && s.joined_nodes > 0)) {
        job.idle_since.reset();
      } else if (!job.idle_since.has_value()) {
        job.idle_since = now;
      } else if (now - *job.idle_since > options_.retention) {
        job.ended = now;
        job.abandoned = true;
        RememberEnded(id);
        abandon = true;
      }
    }
    if (abandon) {
      if (options_.coordinator.log != nullptr) {
        GRAVAC_LOG(*options_.coordinator.log, kWarning,
                   "%s abandoned: no daemon connected for %s; it counts as ended", id.ToString(),
                   absl::FormatDuration(options_.retention));
      }
      coordinator->Shutdown();
    }
  }
}

JobSummaryInfo JobRegistry::Summarize(const JobId& id, const Job& job) const {
  JobSummaryInfo out;
  out.id = id;
  out.status = job.coordinator->Status();
  out.started = job.started;
  out.ended = job.ended;
  out.failure = job.failure;
  out.state = !job.failure.empty()   ? JobState::kFailed
              : job.ended.has_value() ? JobState::kEnded
              : out.status.assembled  ? JobState::kRunning
                                      : JobState::kAssembling;
  return out;
}

std::vector<JobSummaryInfo> JobRegistry::List() const {
  std::vector<std::pair<JobId, Job>> jobs;
  std::vector<JobSummaryInfo> out;
  {
    absl::MutexLock lock(&mu_);
    jobs.assign(jobs_.begin(), jobs_.end());
    for (const auto& [id, when] : unjoined_failures_) {
      auto failure = failures_.find(id);
      if (failure == failures_.end()) continue;  // evicted with its run id
      JobSummaryInfo s;
      s.id = id;
      s.state = JobState::kFailed;
      s.started = when;
      s.ended = when;
      s.failure = failure->second;
      out.push_back(std::move(s));
    }
  }
  for (const auto& [id, job] : jobs) out.push_back(Summarize(id, job));
  std::stable_sort(out.begin(), out.end(), [](const JobSummaryInfo& a, const JobSummaryInfo& b) {
    return a.started < b.started;
  });
  return out;
}

absl::StatusOr<JobSummaryInfo> JobRegistry::Status(const std::string& name,
                                                   const std::string& run_id) const {
  std::vector<JobSummaryInfo> jobs = List();
  std::string want = name;
  if (want.empty()) want = jobs.size() == 1 ? jobs[0].id.name : kDefaultJobName;
  const JobSummaryInfo* found = nullptr;
  for (const JobSummaryInfo& j : jobs) {
    if (j.id.name != want || (!run_id.empty() && j.id.run_id != run_id)) continue;
    if (found == nullptr || j.started >= found->started) found = &j;
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrFormat(
        "%s is not known to this controller (%d jobs known)",
        JobId{want, run_id}.ToString(), jobs.size()));
  }
  return *found;
}

void JobRegistry::Shutdown() {
  std::vector<std::shared_ptr<Coordinator>> all;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, job] : jobs_) all.push_back(job.coordinator);
  }
  for (auto& c : all) c->Shutdown();
}

}  // namespace gravac::controller

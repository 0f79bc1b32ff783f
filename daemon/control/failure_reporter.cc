#include "daemon/control/failure_reporter.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "daemon/control/controller_client.h"

namespace gravac::daemon {

FailureReporter::FailureReporter(FailureReporterOptions options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

FailureReporter::~FailureReporter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
  }
  thread_.join();
}

absl::StatusOr<bool> FailureReporter::ReportNow(const FailureReporterOptions& options,
                                                const JobId& job, int node_rank,
                                                const absl::Status& why) {
  ControllerClientOptions copts;
  copts.address = options.controller;
  copts.security = options.security;
  copts.log = options.log;
  absl::StatusOr<std::unique_ptr<ControllerClient>> client =
      ControllerClient::Create(std::move(copts));
  if (!client.ok()) return client.status();
  return (*client)->FailJob(job, options.node_name, node_rank, why, options.timeout);
}

bool FailureReporter::Report(const JobId& job, int node_rank, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (stop_ || !reported_.insert(job).second) return false;
  reported_order_.push_back(job);
  while (reported_order_.size() > std::max<size_t>(options_.remember, 1)) {
    reported_.erase(reported_order_.front());
    reported_order_.pop_front();
  }
  queue_.push_back({job, node_rank, why});
  return true;
}

int64_t FailureReporter::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

void FailureReporter::Loop() {
  while (true) {
    Pending next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<bool> failed = ReportNow(options_, next.job, next.node_rank, next.why);
    {
      absl::MutexLock lock(&mu_);
      ++sent_;
    }
    if (options_.log == nullptr) continue;
    if (!failed.ok()) {
      GRAVAC_LOG(*options_.log, kWarning,
                 "node '%s': %s: could not report the failure to the controller: %s",
                 options_.node_name, next.job.ToString(), failed.status().message());
    } else if (*failed) {
      GRAVAC_LOG(*options_.log, kInfo,
                 "node '%s': %s: reported the failure; the controller failed the job",
                 options_.node_name, next.job.ToString());
    }
  }
}

}  // namespace gravac::daemon

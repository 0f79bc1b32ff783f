// FailureReporter: tells gravac-controller that a job failed on this node (rpc FailJob, through
// ControllerClient::FailJob), so the controller fails the job and the job's other nodes stop
// waiting in Join (or lose their decision stream) at once with the reason, which names the job
// and this node, instead of waiting for the join timeout.
//
// Two ways to report:
//   - ReportNow: synchronous, at most `timeout` (a JobSession whose Run failed, on its own thread);
//   - Report: queued and sent by the reporter's own thread, so a caller that must not block (the
//     --serve_jobs accept loop refusing a worker at hello) returns at once. Each job is reported
//     once (its other refused workers add nothing); the `remember` newest job ids are kept for
//     that. A failed report is logged (warning), never retried: the other nodes then wait for the
//     join timeout, as without the report.
//
// Thread-safety: Report is safe from any thread and never blocks on the network. The destructor
// drops the reports not yet sent and waits for the one in flight (at most `timeout`).
#ifndef GRAVAC_DAEMON_CONTROL_FAILURE_REPORTER_H_
#define GRAVAC_DAEMON_CONTROL_FAILURE_REPORTER_H_

#include <cstddef>
#include <deque>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "proto/grpc_security.h"

namespace gravac::daemon {

struct FailureReporterOptions {
  std::string controller;         // host:port of gravac-controller
  proto::GrpcSecurity security;   // as the daemon's ControllerClient (mutual TLS or plain text)
  std::string node_name;          // this node, as the controller knows it (its certificate's)
  Logger* log = nullptr;          // not owned; nullptr = no logging
  absl::Duration timeout = absl::Seconds(5);  // one report at most
  size_t remember = 1024;         // job ids already reported, newest kept
};

class FailureReporter {
 public:
  explicit FailureReporter(FailureReporterOptions options);
  ~FailureReporter();
  FailureReporter(const FailureReporter&) = delete;
  FailureReporter& operator=(const FailureReporter&) = delete;

  // Reports `job`'s failure on this node with `why` now (node_rank -1: not placed yet). Returns
  // whether the controller failed the job now (false: it had ended or failed before), or why the
  // report failed (the controller unreachable, refusing this node's identity, ...).
  static absl::StatusOr<bool> ReportNow(const FailureReporterOptions& options, const JobId& job,
                                        int node_rank, const absl::Status& why);

  // Queues the report of `job`'s failure (see ReportNow); non-blocking. Returns false, queueing
  // nothing, when `job` was reported (or queued) before.
  bool Report(const JobId& job, int node_rank, const absl::Status& why);

  // Reports sent so far (answered or not). For tests and logs.
  int64_t sent() const;

 private:
  struct Pending {
    JobId job;
    int node_rank = -1;
    absl::Status why;
  };
  void Loop();

  const FailureReporterOptions options_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::set<JobId> reported_ ABSL_GUARDED_BY(mu_);
  std::deque<JobId> reported_order_ ABSL_GUARDED_BY(mu_);
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_CONTROL_FAILURE_REPORTER_H_

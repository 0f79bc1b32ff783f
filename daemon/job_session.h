// JobSession: one job on this node, from its local workers' hellos to its end: the workers'
// WorkerServer (given), the job's data-plane transport, its ControllerClient session and its
// Engine. gravacd runs one (its one-job mode) or one per job it serves (--serve_jobs, JobService),
// each on its own thread, so concurrent jobs share nothing but the node's metrics and logger.
//
// Run() goes through these steps, each failure returned with the step, the node and the job named:
//   1. WorkerServer::WaitForWorkers (their hellos give this node's ranks: first_rank,
//      local_size, world_size);
//   2. the data-plane transport (transport_registry; ucx with UCX_TLS / UCX_NET_DEVICES and the
//      data port range), whose rank is this node's rank (NodePlacement) and whose LocalAddress
//      goes to
//   3. ControllerClient::Join (naming the job), which returns every node's layout and address;
//   4. Communicator::Connect over those addresses; the job's DeviceCollectives, agreed with the
//      other nodes over it (device_collectives_choice.h: --device_collectives, NCCL built, and
//      `device_intake`, whether this gravacd takes its workers' device tensors); nccl ones go to
//      the engine, whose device step runs over them (EngineOptions::device_collectives, executor.h),
//      host ones it is not given (it runs over the Communicator itself); ControllerClient::Start,
//      Engine::Start;
//   5. WorkerServer::Serve(Engine::Enqueue, Engine::FailLocal), then WaitForShutdown (every local
//      worker called gravac_shutdown or disconnected);
//   6. Engine::Shutdown (agreed with the other nodes), ControllerClient::Shutdown and Leave,
//      WorkerServer::Stop.
// With `fail_workers`, a failure before step 5 is also handed to the workers (WorkerServer::Fail:
// their requests fail with it) and Run waits up to kFailLinger for them to leave, so a worker of a
// --serve_jobs daemon learns why its job cannot run (a run id the controller ended, an exhausted
// data port range) from its first collective.
//
// A failure of Run (not after RequestStop) is reported to the controller (ControllerClient::
// FailJob, at most kReportTimeout) before the workers hear of it, unless the controller itself
// refused the job (an ended or failed run id): the controller fails the job, so its other nodes'
// sessions stop waiting in Join (or lose their decision stream) at once with the reason, which
// names this node, instead of waiting for the join timeout.
//
// RequestStop() (from another thread) makes Run leave whichever wait it is in within about 200 ms
// (a Join in progress is cancelled) and shut down with short timeouts; Run then returns OK.
//
// Thread-safety: Run is called once, from one thread; RequestStop and done() are safe from any.
#ifndef GRAVAC_DAEMON_JOB_SESSION_H_
#define GRAVAC_DAEMON_JOB_SESSION_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "daemon/daemon_metrics.h"
#include "daemon/gravacd_options.h"
#include "daemon/local/worker_server.h"

namespace gravac::daemon {

class ControllerClient;

class JobSession {
 public:
  // `options` are the node's (its job, node_rank and nodes are this job's: see JobService);
  // `server` serves this job's workers. `log` and `metrics` (nullptr = none) must outlive Run.
  // `device_intake`: the server takes the workers' device tensors (its DeviceAccess is
  // Available()).
  JobSession(GravacdOptions options, std::unique_ptr<WorkerServer> server, Logger* log,
             DaemonMetrics* metrics, bool fail_workers, bool device_intake)
      : options_(std::move(options)),
        server_(std::move(server)),
        log_(log),
        metrics_(metrics),
        fail_workers_(fail_workers),
        device_intake_(device_intake) {}
  JobSession(const JobSession&) = delete;
  JobSession& operator=(const JobSession&) = delete;

  static constexpr absl::Duration kFailLinger = absl::Seconds(10);
  static constexpr absl::Duration kReportTimeout = absl::Seconds(5);

  // Runs the job on this node to its end (see header comment). Blocks.
  absl::Status Run();
  // Asks Run to stop. Thread-safe, non-blocking.
  void RequestStop();

  const JobId& job() const { return options_.job; }
  WorkerServer& server() { return *server_; }

 private:
  absl::Status RunSteps(bool* serving);
  // Tells the controller that this node's part of the job failed with `why` (see above).
  void ReportFailure(const absl::Status& why);
  bool stop_requested() const;
  // Repeats `wait(slice)` until it returns anything but DeadlineExceeded, the total `limit`
  // passed (its last DeadlineExceeded is returned) or a stop was requested (Cancelled).
  absl::Status WaitInSlices(absl::Duration limit,
                            const std::function<absl::Status(absl::Duration)>& wait);
  // "node 'N': job 'J' run 'R'".
  std::string Where() const;

  const GravacdOptions options_;
  const std::unique_ptr<WorkerServer> server_;
  Logger* const log_;
  DaemonMetrics* const metrics_;
  const bool fail_workers_;
  const bool device_intake_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  ControllerClient* joining_ ABSL_GUARDED_BY(mu_) = nullptr;  // set while Join blocks
  int node_rank_ = -1;  // Run's thread: this node's rank in the job once placed
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_JOB_SESSION_H_

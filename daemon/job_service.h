// JobService: gravacd's service mode (--serve_jobs). One daemon per node serves successive and
// concurrent jobs and never exits because a job ended: it listens on the node's socket, reads
// each worker's Hello (which names its job: name + run id, from GRAVAC_JOB_NAME/GRAVAC_RUN_ID)
// and hands the connection to that job's JobSession, made on the job's first worker. Each session
// has its own WorkerServer (workers, segments, local reduction), transport listener, controller
// session (Join/stats/decisions/Leave under the job's identity), engine and residuals, and runs on
// its own thread; when it ends the service forgets it and idles until the next job's workers.
//
// A worker is refused with a clear Error (its gravac_init fails with the message, which names the
// node and the job) when
//   - its job is not in --jobs (PermissionDenied: this daemon does not serve it);
//   - its job's workers would not fit in the node's free --slots (ResourceExhausted naming the
//     jobs holding them);
//   - its job already has all its workers here (AlreadyExists: a second group claiming the job's
//     slots, or a rerun that reused the run id while the first run is still here);
//   - it sends no hello within kHelloTimeout, a malformed one, or names a malformed job id.
// Each of these refusals but the last two also fails the job at the controller (FailureReporter,
// rpc FailJob, sent off the accept loop, once per job), so the job's workers on other nodes fail
// at once with an error naming the job and this node instead of waiting for the join timeout. An
// AlreadyExists refusal does not: the job holding the slots is the one running here.
// A regroup hello (an elastic job's worker asking for its place in the next membership) goes to
// the RegroupDesk (regroup_desk.h), which answers it and closes the connection.
// A session that cannot start (a run id the controller ended, an exhausted data port range, a
// controller that refuses the job) fails its own workers' requests with the reason
// (JobSession's fail_workers); the other sessions are not touched.
//
// Metrics: each session gets its own DaemonMetrics (CreateForJob: gravacd's families with the
// labels job_name and run_id), made with the session and kept `job_metrics_retention` after the
// session ended, then removed from /metrics. A session of the same job id made meanwhile (a
// retried start that never reached the controller) replaces the kept series at once.
//
// Thread-safety: Run is called once, from one thread (it runs the accept loop); RequestStop is
// safe from any thread. Blocking: Run blocks until RequestStop, then stops every session.
#ifndef GRAVAC_DAEMON_JOB_SERVICE_H_
#define GRAVAC_DAEMON_JOB_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/ipc/cuda_ipc.h"
#include "core/ipc/framing.h"
#include "core/ipc/peer_credentials.h"
#include "core/ipc/unique_fd.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "daemon/control/failure_reporter.h"
#include "daemon/daemon_metrics.h"
#include "daemon/gravacd_options.h"
#include "daemon/job_session.h"
#include "daemon/local/device_reduce.h"
#include "daemon/regroup_desk.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon {

class JobService {
 public:
  // `log` and `registry` (the process's metrics registry; nullptr = no metrics) must outlive
  // the service.
  JobService(GravacdOptions options, Logger* log, prometheus::Registry* registry);
  ~JobService();
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  static constexpr absl::Duration kHelloTimeout = absl::Seconds(10);

  // Listens on options.socket_path and serves jobs until RequestStop. Fails only when the socket
  // cannot be opened (AlreadyExists while another daemon answers on it).
  absl::Status Run();
  // Asks Run to return (stopping every session). Thread-safe, non-blocking.
  void RequestStop();

 private:
  struct Greeting {  // a connection whose hello is not read yet
    ipc::UniqueFd fd;
    ipc::FrameReader reader;
    absl::Time deadline;
  };
  struct Session {
    std::unique_ptr<DaemonMetrics> metrics;  // outlives the session (declared first)
    std::unique_ptr<JobSession> session;
    int slots = 0;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void Wake();  // the accept loop looks at its sessions now
  void AcceptAll();
  // Reads from a greeting connection; routes it once its hello is complete.
  void ReadHello(int fd);
  // Hands the connection to its job's session (made when new), or refuses it.
  void Route(ipc::UniqueFd fd, ipc::FrameReader reader, std::string payload);
  void Refuse(int fd, const absl::Status& why, int64_t pid);
  // Refuse, and fail the job at the controller (see above); `hello` is the refused worker's.
  void RefuseJob(int fd, const absl::Status& why, const JobId& job, const v1::Hello& hello);
  // Joins the sessions that ended (keeping their metrics until their retention passed); drops
  // the metrics whose retention passed; logs what is still served.
  void Reap();
  // "job 'a' run 'r' (2), job 'b' run 's' (1)": the jobs holding slots.
  std::string Holders() const;
  std::string Where() const;  // "node 'N'"

  const GravacdOptions options_;
  Logger* const log_;
  prometheus::Registry* const registry_;
  ipc::CudaDeviceAccess device_;  // CUDA tensors handed over by IPC, for every session
  BackendDeviceReduce device_reduce_;  // their local reduce in device memory
  ipc::UniqueFd listen_fd_, wake_fd_;
  ino_t socket_inode_ = 0;
  ipc::PeerPolicy peer_policy_;
  std::atomic<bool> stop_{false};
  // Accept loop only.
  std::map<int, Greeting> greetings_;                   // by fd
  std::map<JobId, std::unique_ptr<Session>> sessions_;  // live and not yet reaped
  struct Retired {  // an ended job's series, until `until`
    std::unique_ptr<DaemonMetrics> metrics;
    absl::Time until;
  };
  std::map<JobId, Retired> retired_;
  RegroupDesk regroups_;
  FailureReporter failures_;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_JOB_SERVICE_H_

// Gravacd: the node daemon's object graph and its life cycle, built from parsed settings by
// daemon/main.cc (no globals).
//
// Metrics (core/metrics.h): main starts the MetricsEndpoint from --metrics_address before Run
// (StartGravacdMetrics: logs where it serves, writes --metrics_port_file) and passes its
// registry; Run registers gravacd's families (DaemonMetrics, node = --node_name) and hands them to
// the worker servers, the controller clients and the engines.
//
// Two modes:
//   - one job (the default; gravacrun and the Kubernetes sidecar): Run opens the workers' socket
//     (WorkerServer::Start), runs one JobSession (job_session.h: workers' hellos, transport, Join,
//     engine, the workers' shutdown, the job's end) for --job_name/--run_id and returns when it
//     ends. A worker naming another job is refused.
//   - service (--serve_jobs; a per-node service): Run serves successive and concurrent jobs, one
//     JobSession each, routed by the job their workers' hellos name (job_service.h), and returns
//     only after RequestStop. In this mode every gravacd series carries the labels job_name and
//     run_id of its job (as the controller's), made with the job's session and removed
//     --job_metrics_retention_s after it ended (a daemon that served no job yet shows none).
// RequestStop() (SIGINT/SIGTERM, from another thread) makes Run leave whichever wait it is in
// within about 200 ms (a Join in progress is cancelled) and shut down with short timeouts; Run
// then returns OK.
//
// Node rank. The transport needs the node's rank before the join that assigns it. It is taken
// from --node_rank/--nodes when given (gravacrun passes them; in service mode from the workers'
// GRAVAC_NODE_RANK/GRAVAC_NODES); otherwise every node is assumed to hold as many ranks as this
// one (node_rank = first_rank / local_size), and the join's answer is checked against it.
//
// Thread-safety: Run is called once, from one thread; RequestStop is safe from any thread.
#ifndef GRAVAC_DAEMON_GRAVACD_H_
#define GRAVAC_DAEMON_GRAVACD_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/ipc/cuda_ipc.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "daemon/gravacd_options.h"
#include "daemon/local/device_reduce.h"

namespace gravac::daemon {

class JobSession;
class JobService;

// Starts serving /metrics at options.metrics_address ("off": a registry served nowhere), logs
// "metrics: serving on URL" or "metrics: off", and writes the bound port to
// options.metrics_port_file when serving (tmp file + rename). Fails with core/metrics' message
// when the port cannot be bound, or when the port file cannot be written.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartGravacdMetrics(const GravacdOptions& options,
                                                                     Logger* log);

class Gravacd {
 public:
  // `log` and `metrics` (the process's registry; nullptr = no metrics) must outlive the Gravacd.
  Gravacd(GravacdOptions options, Logger* log, prometheus::Registry* metrics = nullptr)
      : options_(std::move(options)), log_(log), metrics_(metrics) {}
  Gravacd(const Gravacd&) = delete;
  Gravacd& operator=(const Gravacd&) = delete;

  // Runs the daemon to its end (see header comment). Blocks.
  absl::Status Run();

  // Asks Run to stop. Thread-safe, non-blocking.
  void RequestStop();

 private:
  const GravacdOptions options_;
  Logger* const log_;
  prometheus::Registry* const metrics_;
  // CUDA tensors handed over by IPC (one-job mode; the JobService has its own).
  ipc::CudaDeviceAccess device_;
  // Their local reduce in device memory (fp32 allreduces on one device).
  BackendDeviceReduce device_reduce_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  JobSession* session_ ABSL_GUARDED_BY(mu_) = nullptr;  // one-job mode, while it runs
  JobService* service_ ABSL_GUARDED_BY(mu_) = nullptr;  // service mode, while it runs
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_GRAVACD_H_

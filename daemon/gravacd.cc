#include "daemon/gravacd.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <utility>

#include "core/absl_compat.h"
#include "core/status.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "daemon/daemon_metrics.h"
#include "daemon/job_service.h"
#include "daemon/job_session.h"
#include "daemon/local/worker_server.h"

namespace gravac::daemon {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartGravacdMetrics(const GravacdOptions& options,
                                                                     Logger* log) {
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsEndpoint> endpoint,
                   MetricsEndpoint::Start(options.metrics_address));
  if (!endpoint->serving()) {
    GRAVAC_LOG(*log, kInfo, "metrics: off");
    return endpoint;
  }
  GRAVAC_LOG(*log, kInfo, "metrics: serving on %s", endpoint->url());
  if (!options.metrics_port_file.empty()) {
    const std::string& path = options.metrics_port_file;
    const std::string tmp = StrCat(path, ".tmp");
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << endpoint->port() << "\n";
      if (!out.good()) {
        return absl::InternalError(StrCat("--metrics_port_file: cannot write ", tmp));
      }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::InternalError(StrCat("--metrics_port_file: cannot rename ", tmp, " to ", path));
    }
  }
  return endpoint;
}

void Gravacd::RequestStop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  if (session_ != nullptr) session_->RequestStop();
  if (service_ != nullptr) service_->RequestStop();
}

absl::Status Gravacd::Run() {
  if (options_.serve_jobs) {
    JobService service(options_, log_, metrics_);  // per-job series (JobService)
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return absl::OkStatus();
      service_ = &service;
    }
    absl::Status served = service.Run();
    absl::MutexLock lock(&mu_);
    service_ = nullptr;
    if (!served.ok()) {
      return absl::Status(served.code(), StrCat("serving jobs on the worker socket ",
                                                options_.socket_path, ": ", served.message()));
    }
    return absl::OkStatus();
  }

  // The metrics go first: every component below reports to them until it is destroyed.
  std::unique_ptr<DaemonMetrics> metrics;
  if (metrics_ != nullptr) {
    ASSIGN_OR_RETURN(metrics,
                     DaemonMetrics::Create(*metrics_, options_.node_name, options_.local_size));
  }
  absl::StatusOr<std::unique_ptr<WorkerServer>> started =
      WorkerServer::Start({.socket_path = options_.socket_path,
                           .socket_group = options_.socket_group,
                           .job = options_.job,
                           .node_name = options_.node_name,
                           .local_size = options_.local_size,
                           .stall_warning = options_.stall_warning,
                           .stall_timeout = options_.stall_timeout,
                           .check_finite = options_.check_finite,
                           .log = log_,
                           .metrics = metrics.get(),
                           .device = &device_,
                           .nccl_built = collectives::NcclDeviceCollectivesBuilt(),
                           .device_reduce = &device_reduce_});
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        StrCat("opening the worker socket ", options_.socket_path, ": ",
                               started.status().message()));
  }
  GRAVAC_LOG(*log_, kInfo, "waiting for %d local workers on %s", options_.local_size,
             options_.socket_path);
  JobSession session(options_, *std::move(started), log_, metrics.get(), /*fail_workers=*/false,
                     /*device_intake=*/device_.Available());
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::OkStatus();
    session_ = &session;
  }
  absl::Status status = session.Run();
  absl::MutexLock lock(&mu_);
  session_ = nullptr;
  return status;
}

}  // namespace gravac::daemon

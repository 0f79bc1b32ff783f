// gravac-controller: one per cluster, serving many jobs (one Coordinator and GraVAC policy per
// job). Rendezvous of each job's daemons, the policy over their combined statistics, decisions
// pushed to every daemon of the job, job status and the job list for gravacctl, gRPC health.
//
//   gravac-controller --listen=0.0.0.0:7070 [--nodes=2] [--job_retention_s=600] [--port_file=F]
//                     [policy flags: every job's settings]
//                     [--metrics_address=0.0.0.0:9470 | off] [--metrics_port_file=F]
//
// Prometheus metrics (controller_metrics.h) are served at http://HOST:PORT/metrics from
// --metrics_address unless it is off; an address that cannot be bound fails start-up.
//
// SIGINT / SIGTERM shut it down cleanly: decision streams end with UNAVAILABLE (the daemons keep
// their last decision and reconnect), open calls get a short grace period.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/controller_metrics.h"
#include "controller/controller_service.h"
#include "controller/controller_settings.h"
#include "controller/coordinator.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/settings.h"
#include "core/status.h"

namespace gravac::controller {
namespace {

// Writes `port` to `path` atomically (tmp + rename); errors name `setting`.
absl::Status WritePortFile(const std::string& setting, const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.good()) return absl::InternalError(setting + ": cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(setting + ": cannot rename " + tmp + " to " + path);
  }
  return absl::OkStatus();
}

// The metrics endpoint of `address`; a malformed address is reported under the setting's name.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetrics(const std::string& address) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint = MetricsEndpoint::Start(address);
  if (endpoint.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_address: ", endpoint.status().message()));
  }
  return endpoint;
}

absl::Status Main(const Settings& s) {
  ASSIGN_OR_RETURN(std::string level_text, s.GetString("log_level"));
  ASSIGN_OR_RETURN(LogLevel level, ParseLogLevel(level_text));
  Logger log("gravac-controller", level);
  ASSIGN_OR_RETURN(ControllerServerOptions options, OptionsFromSettings(s, &log));
  const CoordinatorOptions& job = options.coordinator;
  GRAVAC_LOG(log, kInfo,
             "job: %d nodes, compressor %s, sparse values %s, theta in [%g, %g], policy %s, norm "
             "%s, seed %d",
             job.nodes, job.compressor, job.sparse_values, job.policy.theta_min,
             job.policy.theta_max, policy::ScalingKindName(job.policy.scaling),
             policy::NormModeName(job.policy.norm_mode), static_cast<int64_t>(job.job_seed));

  // Signals are taken synchronously by this thread; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Declared before the server: the metrics outlive the Coordinator that reports to them.
  ASSIGN_OR_RETURN(std::string metrics_address, s.GetString("metrics_address"));
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsEndpoint> endpoint, StartMetrics(metrics_address));
  ControllerMetrics metrics(endpoint->registry());
  options.observers = [&metrics](const JobId& id) { return metrics.ForJob(id); };
  if (endpoint->serving()) {
    GRAVAC_LOG(log, kInfo, "metrics: serving on %s", endpoint->url());
  } else {
    GRAVAC_LOG(log, kInfo, "metrics: off");
  }

  ASSIGN_OR_RETURN(std::unique_ptr<ControllerServer> server,
                   ControllerServer::Start(std::move(options)));
  ASSIGN_OR_RETURN(std::string port_file, s.GetString("port_file"));
  if (!port_file.empty()) RETURN_IF_ERROR(WritePortFile("port_file", port_file, server->port()));
  ASSIGN_OR_RETURN(std::string metrics_port_file, s.GetString("metrics_port_file"));
  if (!metrics_port_file.empty() && endpoint->serving()) {
    RETURN_IF_ERROR(WritePortFile("metrics_port_file", metrics_port_file, endpoint->port()));
  }

  int signal = 0;
  sigwait(&signals, &signal);
  GRAVAC_LOG(log, kInfo, "signal %d: shutting down", signal);
  server->Shutdown();
  for (const JobSummaryInfo& job : server->jobs()->List()) {
    const JobStatusInfo& status = job.status;
    GRAVAC_LOG(log, kInfo,
               "final: %s (%s): %d steps observed, last step %d, decision epoch %d theta %g, "
               "bytes saved %d",
               job.id.ToString(), JobStateName(job.state), static_cast<int>(status.steps_observed),
               status.last_step, status.decision.epoch, status.decision.theta,
               status.bytes_dense - status.bytes_sent);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gravac::controller

int main(int argc, char** argv) {
  using gravac::Settings;
  namespace c = gravac::controller;
  std::vector<const char*> args(argv + 1, argv + argc);
  const std::vector<gravac::SettingSpec> table = c::ControllerSettings();
  absl::StatusOr<Settings> settings = Settings::Parse(table, args, gravac::ProcessEnvironment());
  if (settings.ok() && settings->help_requested()) {
    std::fputs(Settings::Help(table, "gravac-controller").c_str(), stdout);
    return 0;
  }
  absl::Status status = settings.ok() ? c::Main(*settings) : settings.status();
  if (!status.ok()) {
    absl::FPrintF(stderr, "gravac-controller: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

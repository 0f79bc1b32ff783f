// gravac-controller: one per job. Rendezvous of the daemons, the GraVAC policy over their
// combined statistics, decisions pushed to every daemon, job status for gravacctl.
//
//   gravac-controller --listen=0.0.0.0:7070 --nodes=2 [--port_file=F] [policy flags]
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
#include "controller/coordinator.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/settings.h"
#include "core/status.h"

namespace gravac::controller {
namespace {

constexpr SettingSpec kSettings[] = {
    {"listen", "GRAVAC_CONTROLLER_LISTEN", "0.0.0.0:0", "host:port to serve on (port 0 = pick)",
     SettingType::kString},
    {"port_file", "", "", "write the bound port to this file once listening", SettingType::kString},
    {"metrics_address", "GRAVAC_CONTROLLER_METRICS_ADDRESS", "0.0.0.0:9470",
     "host:port serving Prometheus metrics at /metrics (port 0 = any free port; off = none)",
     SettingType::kString},
    {"metrics_port_file", "", "", "write the bound metrics port to this file once serving metrics",
     SettingType::kString},
    {"nodes", "GRAVAC_NODES", "1", "daemons (nodes) expected to join", SettingType::kInt},
    {"join_timeout_s", "GRAVAC_JOIN_TIMEOUT_S", "120",
     "a join round fails when the job did not assemble this long after its first daemon",
     SettingType::kInt},
    {"compressor", "GRAVAC_COMPRESSOR", "topk", "topk | dgc | redsync | randomk | none",
     SettingType::kString},
    {"sparse_values", "GRAVAC_SPARSE_VALUES", "fp32",
     "wire precision of sparse values: fp32 | fp16 | bf16 (2-byte values; compressor none ignores "
     "it)",
     SettingType::kString},
    {"theta_min", "GRAVAC_THETA_MIN", "10", "least compression factor", SettingType::kDouble},
    {"theta_max", "GRAVAC_THETA_MAX", "10000", "most compression factor", SettingType::kDouble},
    {"epsilon", "GRAVAC_EPSILON", "0.75", "least acceptable compression gain",
     SettingType::kDouble},
    {"omega", "GRAVAC_OMEGA", "0.05", "search stops when the two best CT means differ less",
     SettingType::kDouble},
    {"policy", "GRAVAC_POLICY", "geometric", "candidate scaling: geometric | exponential",
     SettingType::kString},
    {"scale", "GRAVAC_SCALE", "2", "geometric scaling factor s", SettingType::kDouble},
    {"window", "GRAVAC_WINDOW", "25", "tracker window and warm-up, in steps", SettingType::kInt},
    {"alpha", "GRAVAC_ALPHA", "0.05", "tracker smoothing", SettingType::kDouble},
    {"eval_steps", "GRAVAC_EVAL_STEPS", "500", "steps per candidate", SettingType::kInt},
    {"norm_mode", "GRAVAC_NORM_MODE", "sum_layer_l2", "sum_layer_l2 | global_squared_l2",
     SettingType::kString},
    {"job_seed", "GRAVAC_JOB_SEED", "0", "seed of randomised compressors", SettingType::kInt},
    {"decision_delay", "GRAVAC_DECISION_DELAY", "",
     "test hook: node:ms[,node:ms] delays decisions pushed to those nodes", SettingType::kString},
    {"log_level", "GRAVAC_LOG_LEVEL", "info", "debug | info | warning | error",
     SettingType::kString},
};

absl::StatusOr<ControllerServerOptions> OptionsFromSettings(const Settings& s, Logger* log) {
  ControllerServerOptions o;
  ASSIGN_OR_RETURN(o.listen, s.GetString("listen"));
  CoordinatorOptions& c = o.coordinator;
  c.log = log;
  ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
  c.nodes = static_cast<int>(nodes);
  ASSIGN_OR_RETURN(int64_t join_timeout, s.GetInt("join_timeout_s"));
  c.join_timeout = absl::Seconds(join_timeout);
  ASSIGN_OR_RETURN(c.compressor, s.GetString("compressor"));
  if (c.compressor != "topk" && c.compressor != "dgc" && c.compressor != "redsync" &&
      c.compressor != "randomk" && c.compressor != "none") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compressor: '%s' is not one of topk, dgc, redsync, randomk, none", c.compressor));
  }
  ASSIGN_OR_RETURN(c.sparse_values, s.GetString("sparse_values"));
  RETURN_IF_ERROR(CheckSparseValues(c.sparse_values));
  policy::PolicyConfig& p = c.policy;
  ASSIGN_OR_RETURN(p.theta_min, s.GetDouble("theta_min"));
  ASSIGN_OR_RETURN(p.theta_max, s.GetDouble("theta_max"));
  ASSIGN_OR_RETURN(p.epsilon, s.GetDouble("epsilon"));
  ASSIGN_OR_RETURN(p.omega, s.GetDouble("omega"));
  ASSIGN_OR_RETURN(std::string scaling, s.GetString("policy"));
  ASSIGN_OR_RETURN(p.scaling, policy::ParseScalingKind(scaling));
  ASSIGN_OR_RETURN(p.scaling_factor, s.GetDouble("scale"));
  ASSIGN_OR_RETURN(int64_t window, s.GetInt("window"));
  p.window = static_cast<int>(window);
  ASSIGN_OR_RETURN(p.alpha, s.GetDouble("alpha"));
  ASSIGN_OR_RETURN(p.eval_steps, s.GetInt("eval_steps"));
  ASSIGN_OR_RETURN(std::string norm_mode, s.GetString("norm_mode"));
  ASSIGN_OR_RETURN(p.norm_mode, policy::ParseNormMode(norm_mode));
  RETURN_IF_ERROR(p.Validate());
  ASSIGN_OR_RETURN(int64_t seed, s.GetInt("job_seed"));
  c.job_seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(std::string delay, s.GetString("decision_delay"));
  ASSIGN_OR_RETURN(c.decision_delay, ParseDecisionDelay(delay));
  return o;
}

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
  options.coordinator.observer = &metrics;
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
  const JobStatusInfo status = server->coordinator()->Status();
  GRAVAC_LOG(log, kInfo,
             "final: %d steps observed, last step %d, decision epoch %d theta %g, bytes saved %d",
             static_cast<int>(status.steps_observed), status.last_step, status.decision.epoch,
             status.decision.theta, status.bytes_dense - status.bytes_sent);
  return absl::OkStatus();
}

}  // namespace
}  // namespace gravac::controller

int main(int argc, char** argv) {
  using gravac::Settings;
  namespace c = gravac::controller;
  std::vector<const char*> args(argv + 1, argv + argc);
  absl::StatusOr<Settings> settings =
      Settings::Parse(c::kSettings, args, gravac::ProcessEnvironment());
  if (settings.ok() && settings->help_requested()) {
    std::fputs(Settings::Help(c::kSettings, "gravac-controller").c_str(), stdout);
    return 0;
  }
  absl::Status status = settings.ok() ? c::Main(*settings) : settings.status();
  if (!status.ok()) {
    absl::FPrintF(stderr, "gravac-controller: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

#include "controller/controller_settings.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "controller/coordinator.h"
#include "controller/policy/policy_config.h"
#include "core/absl_compat.h"
#include "core/job_settings.h"
#include "core/status.h"
#include "core/tls_settings.h"
#include "proto/grpc_security.h"

namespace gravac::controller {
namespace {

constexpr SettingSpec kServerSettings[] = {
    {"listen", "GRAVAC_CONTROLLER_LISTEN", "0.0.0.0:0", "host:port to serve on (port 0 = pick)",
     SettingType::kString},
    {"port_file", "", "", "write the bound port to this file once listening", SettingType::kString},
    {"metrics_address", "GRAVAC_CONTROLLER_METRICS_ADDRESS", "0.0.0.0:9470",
     "host:port serving Prometheus metrics at /metrics (port 0 = any free port; off = none)",
     SettingType::kString},
    {"metrics_port_file", "", "", "write the bound metrics port to this file once serving metrics",
     SettingType::kString},
    {"nodes", "GRAVAC_NODES", "1",
     "daemons (nodes) of a job whose daemons do not say how many (gravacd --nodes)",
     SettingType::kInt},
    {"job_retention_s", "GRAVAC_JOB_RETENTION_S", "600",
     "an ended job is forgotten this long after its end (its run id stays refused); a job with "
     "no daemon connected for this long counts as ended",
     SettingType::kDouble},
    {"regroup_timeout_s", "GRAVAC_REGROUP_TIMEOUT_S", "10",
     "elastic jobs: a membership change completes without the nodes of the old membership that "
     "did not ask for the new one this long after the first node did (they are lost)",
     SettingType::kDouble},
    {"new_node_wait_s", "GRAVAC_NEW_NODE_WAIT_S", "60",
     "elastic jobs after a host update (gravacrun --elastic-timeout): a membership change waits "
     "this long after its first node asked for the nodes being added before it completes without "
     "them (never less than regroup_timeout_s)",
     SettingType::kDouble},
    {"join_timeout_s", "GRAVAC_JOIN_TIMEOUT_S", "120",
     "a join round fails when the job did not assemble this long after its first daemon",
     SettingType::kInt},
    {"status_without_cert", "GRAVAC_STATUS_WITHOUT_CERT", "false",
     "with TLS: GetJobStatus (gravacctl status) answers clients without a certificate; joins, "
     "statistics and decisions still need the node's certificate",
     SettingType::kBool},
};

constexpr SettingSpec kLogLevel = {"log_level", "GRAVAC_LOG_LEVEL", "info",
                                   "debug | info | warning | error", SettingType::kString};

}  // namespace

std::vector<SettingSpec> ControllerSettings() {
  std::vector<SettingSpec> table(std::begin(kServerSettings), std::end(kServerSettings));
  for (const SettingSpec& spec : TlsSettings()) table.push_back(spec);
  for (const SettingSpec& spec : JobSettings()) table.push_back(spec);
  table.push_back(kLogLevel);
  return table;
}

absl::StatusOr<std::map<int, absl::Duration>> ParseDecisionDelay(std::string_view text) {
  std::map<int, absl::Duration> delays;
  if (text.empty()) return delays;
  for (absl::string_view entry : absl::StrSplit(AsAbsl(text), ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    int node = 0;
    int64_t ms = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &node) ||
        !absl::SimpleAtoi(parts[1], &ms) || node < 0 || ms < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("decision_delay: entry '", entry, "' is not node:ms (node >= 0, ms >= 0)"));
    }
    delays[node] = absl::Milliseconds(ms);
  }
  return delays;
}

absl::StatusOr<ControllerServerOptions> OptionsFromSettings(const Settings& s, Logger* log) {
  ControllerServerOptions o;
  ASSIGN_OR_RETURN(o.listen, s.GetString("listen"));
  ASSIGN_OR_RETURN(o.security, proto::GrpcSecurityFromSettings(s, proto::GrpcRole::kServer));
  ASSIGN_OR_RETURN(o.status_without_cert, s.GetBool("status_without_cert"));
  if (o.status_without_cert && o.security.plaintext) {
    return absl::InvalidArgumentError(
        "status_without_cert: only meaningful with TLS (with --insecure_plaintext everything is "
        "open)");
  }
  CoordinatorOptions& c = o.coordinator;
  c.log = log;
  ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
  c.nodes = static_cast<int>(nodes);
  ASSIGN_OR_RETURN(double retention, s.GetDouble("job_retention_s"));
  if (!(retention > 0) || retention > 1e9) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job_retention_s: must be > 0, got %g", retention));
  }
  o.job_retention = absl::Seconds(retention);
  ASSIGN_OR_RETURN(double regroup, s.GetDouble("regroup_timeout_s"));
  if (!(regroup > 0) || regroup > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("regroup_timeout_s: must be > 0, got %g", regroup));
  }
  o.regroup_timeout = absl::Seconds(regroup);
  ASSIGN_OR_RETURN(double new_node_wait, s.GetDouble("new_node_wait_s"));
  if (!(new_node_wait > 0) || new_node_wait > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("new_node_wait_s: must be > 0, got %g", new_node_wait));
  }
  o.new_node_wait = absl::Seconds(new_node_wait);
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
  ASSIGN_OR_RETURN(int64_t min_dwell, s.GetInt("min_dwell"));
  p.min_dwell = static_cast<int>(min_dwell);
  ASSIGN_OR_RETURN(p.min_relative_gain, s.GetDouble("min_relative_gain"));
  ASSIGN_OR_RETURN(std::string norm_mode, s.GetString("norm_mode"));
  ASSIGN_OR_RETURN(p.norm_mode, policy::ParseNormMode(norm_mode));
  RETURN_IF_ERROR(p.Validate());
  ASSIGN_OR_RETURN(int64_t seed, s.GetInt("job_seed"));
  c.job_seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(std::string delay, s.GetString("decision_delay"));
  ASSIGN_OR_RETURN(c.decision_delay, ParseDecisionDelay(delay));
  return o;
}

}  // namespace gravac::controller

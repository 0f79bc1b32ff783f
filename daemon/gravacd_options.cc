#include "daemon/gravacd_options.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/absl_compat.h"
#include "core/metrics.h"
#include "core/status.h"
#include "core/tls_settings.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "daemon/transport/transport_registry.h"

namespace gravac::daemon {
namespace {

constexpr SettingSpec kSettings[] = {
    {"controller", "GRAVAC_CONTROLLER", "", "host:port of gravac-controller (required)"},
    {"job_name", "GRAVAC_JOB_NAME", "default", "name of the job this daemon serves"},
    {"run_id", "GRAVAC_RUN_ID", "",
     "run id of the job (a rerun of a name needs a new one; gravacrun generates it)"},
    {"socket", "GRAVAC_DAEMON_SOCKET", "", "Unix socket path for the local workers (required)"},
    {"socket_group", "GRAVAC_SOCKET_GROUP", "", "group allowed on the socket (mode 0660)"},
    {"local_size", "GRAVAC_LOCAL_SIZE", "1", "workers on this node", SettingType::kInt},
    {"node_name", "GRAVAC_NODE_NAME", "", "this node's name (default: the host name)"},
    {"node_rank", "GRAVAC_NODE_RANK", "-1",
     "this node's rank; -1 = first_rank / local_size (equal nodes)", SettingType::kInt},
    {"nodes", "GRAVAC_NODES", "0",
     "nodes in the job; 0 = world_size / local_size (given alone: checked against that)",
     SettingType::kInt},
    {"transport", "GRAVAC_TRANSPORT", "ucx", "data-plane transport backend"},
    {"ucx_tls", "GRAVAC_UCX_TLS", "", "UCX_TLS for the data plane (e.g. tcp)"},
    {"ucx_net_devices", "GRAVAC_UCX_NET_DEVICES", "", "UCX_NET_DEVICES (e.g. eth0)"},
    {"data_port_range", "GRAVAC_DATA_PORT_RANGE", "",
     "LO-HI: the data plane listens only on these TCP ports (for a NetworkPolicy); empty = any"},
    {"device_collectives", "GRAVAC_DEVICE_COLLECTIVES", "host",
     "collectives between nodes for the job's device buffers: nccl (NCCL allreduce and "
     "allgather on device memory; needs NCCL in every node's gravacd and its workers' device "
     "tensors), host (the host data plane), auto (nccl when every node can, else host); agreed "
     "at the job's start, a mix of nccl and host is refused. With nccl the engine runs the dense "
     "and sparse steps of fp32 device tensors in device memory (other groups on the host data "
     "plane). Default host: the nccl path has not run on a GPU yet"},
    {"nccl_device", "GRAVAC_NCCL_DEVICE", "0",
     "CUDA device of gravacd's NCCL communicator (the device of the engine's device buffers)",
     SettingType::kInt},
    {"fusion_threshold_bytes", "GRAVAC_FUSION_THRESHOLD", "67108864", "tensor fusion buffer size",
     SettingType::kInt},
    {"cycle_time_ms", "GRAVAC_CYCLE_TIME_MS", "1", "negotiation cycle time", SettingType::kDouble},
    {"stall_warning_s", "GRAVAC_STALL_WARNING_S", "60", "warn about tensors waiting this long",
     SettingType::kDouble},
    {"op_timeout_s", "GRAVAC_OP_TIMEOUT_S", "30",
     "data-plane silence that fails a collective (at most --stall_timeout_s)",
     SettingType::kDouble},
    {"stall_timeout_s", "GRAVAC_STALL_TIMEOUT_S", "600",
     "a tensor some local ranks posted and others did not for this long fails the job on every "
     "rank, naming the tensor and the missing ranks; also bounds the data-plane silence "
     "(--op_timeout_s) and how long a worker waits for a silent (hung, stopped) gravacd",
     SettingType::kDouble},
    {"serve_jobs", "GRAVAC_SERVE_JOBS", "false",
     "serve successive and concurrent jobs, each named by its workers' hellos, and never exit "
     "because a job ended (a per-node service); --local_size, --job_name, --run_id, --node_rank "
     "and --nodes then come from each job's workers",
     SettingType::kBool},
    {"jobs", "GRAVAC_JOBS", "",
     "--serve_jobs: comma-separated job names served here (empty = any); workers of other jobs "
     "are refused"},
    {"slots", "GRAVAC_SLOTS", "0",
     "--serve_jobs: worker slots of this node (0 = unlimited); a job whose workers do not fit in "
     "the free slots is refused",
     SettingType::kInt},
    {"job_metrics_retention_s", "GRAVAC_JOB_METRICS_RETENTION_S", "300",
     "--serve_jobs: how long an ended job's series (labels job_name, run_id) stay on /metrics "
     "before they are removed (give Prometheus a scrape or two of the final values)",
     SettingType::kDouble},
    {"check_finite", "GRAVAC_CHECK_FINITE", "false",
     "refuse float allreduce inputs holding NaN or infinity (fails the tensor on every rank)",
     SettingType::kBool},
    {"step_log", "GRAVAC_STEP_LOG", "", "file with one line per executed group"},
    {"timeline_filename", "GRAVAC_TIMELINE_FILENAME", "",
     "Horovod's timeline: a Chrome trace of every tensor's phases from the start (node 0 "
     "writes it; hvd.start_timeline starts one later)"},
    {"worker_timeout_s", "GRAVAC_WORKER_TIMEOUT_S", "120", "limit for the local workers' hellos",
     SettingType::kDouble},
    {"join_timeout_s", "GRAVAC_JOIN_TIMEOUT_S", "120", "limit for all daemons to join",
     SettingType::kDouble},
    {"shutdown_timeout_s", "GRAVAC_SHUTDOWN_TIMEOUT_S", "60",
     "limit for the nodes to agree the end of the job", SettingType::kDouble},
    {"metrics_address", "GRAVAC_METRICS_ADDRESS", "0.0.0.0:9471",
     "serve Prometheus /metrics on host:port (:port = all interfaces, port 0 = any free port); "
     "off = not served"},
    {"metrics_port_file", "", "", "write the bound metrics port to this file once serving"},
    {"log_level", "GRAVAC_LOG_LEVEL", "info", "debug | info | warning | error"},
};

absl::StatusOr<absl::Duration> PositiveSeconds(const Settings& s, std::string_view name) {
  ASSIGN_OR_RETURN(double v, s.GetDouble(name));
  if (!(v > 0) || v > 1e9) {
    return absl::InvalidArgumentError(absl::StrFormat("--%s must be > 0, got %g", name, v));
  }
  return absl::Seconds(v);
}

}  // namespace

std::vector<SettingSpec> GravacdSettings() {
  std::vector<SettingSpec> table(std::begin(kSettings), std::end(kSettings));
  // Before log_level, the table's last row.
  table.insert(table.end() - 1, std::begin(kTlsSettings), std::end(kTlsSettings));
  table.insert(table.end() - 1, std::begin(kTlsClientSettings), std::end(kTlsClientSettings));
  return table;
}

absl::StatusOr<GravacdOptions> GravacdOptionsFromSettings(const Settings& s) {
  GravacdOptions o;
  ASSIGN_OR_RETURN(o.controller, s.GetString("controller"));
  if (o.controller.empty()) {
    return absl::InvalidArgumentError("--controller (GRAVAC_CONTROLLER) is required");
  }
  ASSIGN_OR_RETURN(o.job.name, s.GetString("job_name"));
  ASSIGN_OR_RETURN(o.job.run_id, s.GetString("run_id"));
  o.job = o.job.Normalized();
  if (absl::Status bad = CheckJobId(o.job); !bad.ok()) {
    return absl::InvalidArgumentError(StrCat("--job_name/--run_id: ", bad.message()));
  }
  ASSIGN_OR_RETURN(o.socket_path, s.GetString("socket"));
  if (o.socket_path.empty()) {
    return absl::InvalidArgumentError("--socket (GRAVAC_DAEMON_SOCKET) is required");
  }
  ASSIGN_OR_RETURN(o.socket_group, s.GetString("socket_group"));
  ASSIGN_OR_RETURN(int64_t local_size, s.GetInt("local_size"));
  if (local_size < 1 || local_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--local_size must be 1..65536, got %d", local_size));
  }
  o.local_size = static_cast<int>(local_size);
  ASSIGN_OR_RETURN(o.node_name, s.GetString("node_name"));
  ASSIGN_OR_RETURN(int64_t node_rank, s.GetInt("node_rank"));
  ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
  if (node_rank < -1 || node_rank >= 16384 || nodes < 0 || nodes > 16384) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--node_rank (%d) must be -1..16383 and --nodes (%d) 0..16384", node_rank, nodes));
  }
  o.node_rank = static_cast<int>(node_rank);
  o.nodes = static_cast<int>(nodes);
  ASSIGN_OR_RETURN(o.transport, s.GetString("transport"));
  // The engine's collectives reduce in host memory, so the data plane carries host buffers.
  if (absl::Status carries = transport::CheckCarries(o.transport, transport::MemoryType::kHost,
                                                     "gravacd's data plane (its collectives "
                                                     "reduce in host memory)");
      !carries.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--transport (GRAVAC_TRANSPORT): ", carries.message()));
  }
  ASSIGN_OR_RETURN(std::string device_collectives, s.GetString("device_collectives"));
  absl::StatusOr<DeviceCollectivesSetting> setting =
      ParseDeviceCollectivesSetting(device_collectives);
  if (!setting.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--device_collectives (GRAVAC_DEVICE_COLLECTIVES): ", setting.status().message()));
  }
  o.device_collectives = *setting;
  if (o.device_collectives == DeviceCollectivesSetting::kNccl &&
      !collectives::NcclDeviceCollectivesBuilt()) {
    return absl::InvalidArgumentError(
        "--device_collectives=nccl carries the job's device buffers over NCCL, but this gravacd "
        "was built without NCCL (without CUDA, or GRAVAC_WITH_NCCL=OFF): its collectives carry "
        "host memory only; use --device_collectives=host or auto, or a CUDA build with NCCL");
  }
  ASSIGN_OR_RETURN(int64_t nccl_device, s.GetInt("nccl_device"));
  if (nccl_device < 0 || nccl_device > 1023) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--nccl_device must be 0..1023, got %d", nccl_device));
  }
  o.nccl_device = static_cast<int>(nccl_device);
  ASSIGN_OR_RETURN(o.ucx_tls, s.GetString("ucx_tls"));
  ASSIGN_OR_RETURN(o.ucx_net_devices, s.GetString("ucx_net_devices"));
  ASSIGN_OR_RETURN(std::string ports, s.GetString("data_port_range"));
  absl::StatusOr<PortRange> range = ParsePortRange(ports);
  if (!range.ok()) {
    return absl::InvalidArgumentError(
        StrCat("--data_port_range (GRAVAC_DATA_PORT_RANGE): ", range.status().message()));
  }
  o.data_ports = *range;
  ASSIGN_OR_RETURN(int64_t fusion, s.GetInt("fusion_threshold_bytes"));
  if (fusion < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--fusion_threshold_bytes must be >= 0, got %d", fusion));
  }
  o.fusion_threshold_bytes = static_cast<size_t>(fusion);
  ASSIGN_OR_RETURN(double cycle_ms, s.GetDouble("cycle_time_ms"));
  if (!(cycle_ms >= 0) || cycle_ms > 60000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--cycle_time_ms must be 0..60000, got %g", cycle_ms));
  }
  o.cycle_time = absl::Microseconds(static_cast<int64_t>(cycle_ms * 1000));
  ASSIGN_OR_RETURN(o.stall_warning, PositiveSeconds(s, "stall_warning_s"));
  ASSIGN_OR_RETURN(o.op_timeout, PositiveSeconds(s, "op_timeout_s"));
  ASSIGN_OR_RETURN(o.stall_timeout, PositiveSeconds(s, "stall_timeout_s"));
  // Every wait is bounded by the stall bound: a peer daemon that stopped (SIGSTOP, hung) is
  // data-plane silence, and must fail this node's ranks within it too.
  o.op_timeout = std::min(o.op_timeout, o.stall_timeout);
  ASSIGN_OR_RETURN(o.check_finite, s.GetBool("check_finite"));
  ASSIGN_OR_RETURN(o.step_log, s.GetString("step_log"));
  ASSIGN_OR_RETURN(o.timeline_filename, s.GetString("timeline_filename"));
  ASSIGN_OR_RETURN(o.worker_timeout, PositiveSeconds(s, "worker_timeout_s"));
  ASSIGN_OR_RETURN(o.join_timeout, PositiveSeconds(s, "join_timeout_s"));
  ASSIGN_OR_RETURN(o.shutdown_timeout, PositiveSeconds(s, "shutdown_timeout_s"));
  ASSIGN_OR_RETURN(o.metrics_address, s.GetString("metrics_address"));
  const std::string address(absl::StripAsciiWhitespace(o.metrics_address));
  if (!address.empty() && absl::AsciiStrToLower(address) != "off") {
    std::string host;
    int port = 0;
    if (absl::Status bad = ParseMetricsAddress(address, &host, &port); !bad.ok()) {
      return absl::InvalidArgumentError(
          StrCat("--metrics_address (GRAVAC_METRICS_ADDRESS): ", bad.message()));
    }
  }
  ASSIGN_OR_RETURN(o.metrics_port_file, s.GetString("metrics_port_file"));
  ASSIGN_OR_RETURN(o.serve_jobs, s.GetBool("serve_jobs"));
  ASSIGN_OR_RETURN(std::string jobs, s.GetString("jobs"));
  for (absl::string_view name : absl::StrSplit(AsAbsl(jobs), ',', absl::SkipWhitespace())) {
    const std::string job(absl::StripAsciiWhitespace(name));
    if (absl::Status bad = CheckJobId({job, ""}); !bad.ok()) {
      return absl::InvalidArgumentError(StrCat("--jobs (GRAVAC_JOBS): ", bad.message()));
    }
    o.jobs.push_back(job);
  }
  ASSIGN_OR_RETURN(int64_t slots, s.GetInt("slots"));
  if (slots < 0 || slots > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat("--slots must be 0..65536, got %d", slots));
  }
  o.slots = static_cast<int>(slots);
  ASSIGN_OR_RETURN(double retention, s.GetDouble("job_metrics_retention_s"));
  if (!(retention >= 0) || retention > 1e7) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--job_metrics_retention_s must be 0..1e7 seconds, got %g", retention));
  }
  o.job_metrics_retention = absl::Seconds(retention);
  if (!o.serve_jobs && (!o.jobs.empty() || o.slots > 0)) {
    return absl::InvalidArgumentError("--jobs and --slots need --serve_jobs");
  }
  ASSIGN_OR_RETURN(o.security, proto::GrpcSecurityFromSettings(s, proto::GrpcRole::kNodeClient));
  return o;
}

absl::StatusOr<std::pair<int, int>> NodePlacement(int first_rank, int local_size, int world_size,
                                                  int node_rank_flag, int nodes_flag) {
  if (node_rank_flag >= 0) {
    if (nodes_flag <= node_rank_flag) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--node_rank (%d) needs --nodes above it (--nodes is %d)", node_rank_flag, nodes_flag));
    }
    return std::make_pair(node_rank_flag, nodes_flag);
  }
  if (local_size < 1 || first_rank % local_size != 0 || world_size % local_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot derive this node's rank: its workers are ranks [%d, %d) of %d, not a whole "
        "share of equal nodes; pass --node_rank and --nodes",
        first_rank, first_rank + local_size, world_size));
  }
  const int nodes = world_size / local_size;
  // --nodes alone (a job-wide setting, e.g. a Kubernetes ConfigMap) checks the derived count.
  if (nodes_flag > 0 && nodes_flag != nodes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--nodes is %d, but the workers make %d nodes: %d ranks, %d on this node",
                        nodes_flag, nodes, world_size, local_size));
  }
  return std::make_pair(first_rank / local_size, nodes);
}

std::string GravacdBuild() {
  std::string transports;
  for (const transport::TransportBackend& backend : transport::TransportBackends()) {
    absl::StrAppend(&transports, transports.empty() ? "" : ", ", std::string(backend.name));
  }
  return StrCat("gravac ", GRAVAC_VERSION, ", CUDA kernels ",
                GRAVAC_CUDA_KERNELS ? "built" : "not built (GRAVAC_WITH_CUDA=OFF)",
                ", data-plane transports: ", transports, ", device collectives: host",
                collectives::NcclDeviceCollectivesBuilt() ? ", nccl" : "");
}

}  // namespace gravac::daemon

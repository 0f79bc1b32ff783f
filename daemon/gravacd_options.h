// GravacdOptions: gravacd's settings table (flags and GRAVAC_* variables), the options read from
// it, and the node placement rule. Used by gravacd's wiring (gravacd.h), its per-job sessions
// (job_session.h) and its service mode (job_service.h).
//
// Thread-safety: plain values and stateless functions.
#ifndef GRAVAC_DAEMON_GRAVACD_OPTIONS_H_
#define GRAVAC_DAEMON_GRAVACD_OPTIONS_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/job_id.h"
#include "core/settings.h"
#include "daemon/data_ports.h"
#include "daemon/device_collectives_choice.h"
#include "proto/grpc_security.h"

namespace gravac::daemon {

struct GravacdOptions {
  std::string controller;    // host:port of gravac-controller
  JobId job;                 // the job this daemon serves (name "" = "default"); per session
  std::string socket_path;   // the workers' Unix socket
  std::string socket_group;  // "" = socket mode 0600
  int local_size = 1;        // workers expected on this node (one-job mode)
  std::string node_name;     // for logs and the controller's status
  int node_rank = -1;        // -1 = derive (see NodePlacement)
  int nodes = 0;             // 0 = derive
  // Service mode (--serve_jobs): serve every job whose workers arrive, one JobSession each, and
  // never exit because a job ended. `jobs`: the job names served (empty = any); `slots`: the
  // node's worker slots shared by the concurrent jobs (0 = unlimited).
  // `job_metrics_retention`: how long an ended job's gravacd series (labelled job_name, run_id)
  // stay on /metrics before they are removed.
  bool serve_jobs = false;
  std::vector<std::string> jobs;
  int slots = 0;
  absl::Duration job_metrics_retention = absl::Minutes(5);
  std::string transport = "ucx";
  std::string ucx_tls;          // "" = UCX's choice
  std::string ucx_net_devices;  // "" = UCX's choice
  PortRange data_ports;         // the data plane listens only there (UCX_TCP_PORT_RANGE)
  // The engine's collectives between nodes for device buffers (device_collectives_choice.h), and
  // the CUDA device of the nccl ones.
  DeviceCollectivesSetting device_collectives = DeviceCollectivesSetting::kAuto;
  int nccl_device = 0;
  size_t fusion_threshold_bytes = size_t{64} << 20;
  absl::Duration cycle_time = absl::Milliseconds(1);
  absl::Duration stall_warning = absl::Seconds(60);
  absl::Duration op_timeout = absl::Seconds(30);        // at most stall_timeout once parsed
  absl::Duration stall_timeout = absl::Seconds(600);    // locally stalled tensor fails the job
  bool check_finite = false;                            // refuse non-finite float allreduces
  std::string step_log;                                 // "" = none
  std::string timeline_filename;                        // "" = none (node 0 writes it)
  absl::Duration worker_timeout = absl::Seconds(120);   // all local workers said hello
  absl::Duration join_timeout = absl::Seconds(120);     // all daemons joined
  absl::Duration shutdown_timeout = absl::Seconds(60);  // engine shutdown agreed
  std::string metrics_address = "0.0.0.0:9471";         // host:port, :port (0 = any) or off
  std::string metrics_port_file;                        // "" = none; the bound port once serving
  proto::GrpcSecurity security;  // mutual TLS with this node's certificate, or plain text
};

// The settings table (flags and GRAVAC_* variables) of gravacd: its own, the TLS settings of
// core/tls_settings.h, then log_level.
std::vector<SettingSpec> GravacdSettings();

// What this gravacd was built with, for --help and its first log line:
// "gravac 0.1.0, CUDA kernels built, data-plane transports: loopback, ucx, nccl, device
// collectives: host, nccl".
std::string GravacdBuild();

// Reads GravacdOptions from parsed settings; InvalidArgument naming the setting for values out
// of range.
absl::StatusOr<GravacdOptions> GravacdOptionsFromSettings(const Settings& settings);

// This node's rank and the number of nodes: from the flags when given (node_rank >= 0 needs
// nodes > node_rank), else derived from the local group assuming equal local sizes. Fails with
// InvalidArgument explaining which flag to pass when it cannot be derived.
absl::StatusOr<std::pair<int, int>> NodePlacement(int first_rank, int local_size, int world_size,
                                                  int node_rank_flag, int nodes_flag);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_GRAVACD_OPTIONS_H_

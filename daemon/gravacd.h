// Gravacd: the node daemon's object graph and its life cycle, built from parsed settings by
// daemon/main.cc (no globals).
//
// Metrics (core/metrics.h): main starts the MetricsEndpoint from --metrics_address before Run
// (StartGravacdMetrics: logs where it serves, writes --metrics_port_file) and passes its
// registry; Run registers gravacd's families (DaemonMetrics, node = --node_name) and hands them to
// the worker server, the controller client and the engine.
//
// Run() goes through these steps, each failure returned with the step named:
//   1. WorkerServer::Start (the workers' Unix socket), WaitForWorkers (their hellos give this
//      node's ranks: first_rank, local_size, world_size);
//   2. the data-plane transport (transport_registry; ucx with UCX_TLS / UCX_NET_DEVICES), whose
//      rank is this node's rank (NodePlacement) and whose LocalAddress goes to
//   3. ControllerClient::Join, which returns every node's layout and address;
//   4. Communicator::Connect over those addresses, ControllerClient::Start, Engine::Start;
//   5. WorkerServer::Serve(Engine::Enqueue, Engine::FailLocal), then WaitForShutdown (every local
//      worker called gravac_shutdown or disconnected);
//   6. Engine::Shutdown (agreed with the other nodes), ControllerClient::Shutdown, WorkerServer
//      Stop (unlinks the socket).
// RequestStop() (SIGINT/SIGTERM, from another thread) makes Run leave whichever wait it is in
// within about 200 ms (a Join in progress is cancelled) and shut down with short timeouts; Run
// then returns OK.
//
// Node rank. The transport needs the node's rank before the join that assigns it. It is taken
// from --node_rank/--nodes when given (gravacrun passes them); otherwise every node is assumed to
// hold as many ranks as this one (node_rank = first_rank / local_size), and the join's answer is
// checked against it.
//
// Thread-safety: Run is called once, from one thread; RequestStop is safe from any thread.
#ifndef GRAVAC_DAEMON_GRAVACD_H_
#define GRAVAC_DAEMON_GRAVACD_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/settings.h"
#include "daemon/data_ports.h"
#include "proto/grpc_security.h"

namespace gravac::daemon {

class ControllerClient;

struct GravacdOptions {
  std::string controller;    // host:port of gravac-controller
  JobId job;                 // the job this daemon serves (name "" = "default")
  std::string socket_path;   // the workers' Unix socket
  std::string socket_group;  // "" = socket mode 0600
  int local_size = 1;        // workers expected on this node
  std::string node_name;     // for logs and the controller's status
  int node_rank = -1;        // -1 = derive (see header comment)
  int nodes = 0;             // 0 = derive
  std::string transport = "ucx";
  std::string ucx_tls;          // "" = UCX's choice
  std::string ucx_net_devices;  // "" = UCX's choice
  PortRange data_ports;         // the data plane listens only there (UCX_TCP_PORT_RANGE)
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

// Reads GravacdOptions from parsed settings; InvalidArgument naming the setting for values out
// of range.
absl::StatusOr<GravacdOptions> GravacdOptionsFromSettings(const Settings& settings);

// This node's rank and the number of nodes: from the flags when given (node_rank >= 0 needs
// nodes > node_rank), else derived from the local group assuming equal local sizes. Fails with
// InvalidArgument explaining which flag to pass when it cannot be derived.
absl::StatusOr<std::pair<int, int>> NodePlacement(int first_rank, int local_size, int world_size,
                                                  int node_rank_flag, int nodes_flag);

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
  bool stop_requested() const;
  // Repeats `wait(slice)` until it returns anything but DeadlineExceeded, the total `limit`
  // passed (its last DeadlineExceeded is returned) or a stop was requested (Cancelled).
  absl::Status WaitInSlices(absl::Duration limit,
                            const std::function<absl::Status(absl::Duration)>& wait);

  const GravacdOptions options_;
  Logger* const log_;
  prometheus::Registry* const metrics_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  ControllerClient* joining_ ABSL_GUARDED_BY(mu_) = nullptr;  // set while Join blocks
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_GRAVACD_H_

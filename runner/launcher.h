// Launcher: runs one gravac job — gravac-controller, one gravacd per node and the workers — on
// this machine or, with options.hosts, on several hosts over ssh, and tears it all down again.
// gravacrun's main.cc is a thin shell around it.
//
// Hosts. With options.hosts, node n runs on hosts[n] with layout[n] ranks. Before anything starts,
// every host that is not this machine is probed over ssh, all at once (ssh_launch.h: ProbeHosts);
// a failed probe fails RunJob naming the host. The controller (unless options.controller names a
// running one) then listens on every address of this machine; a remote gravacd and its workers
// are started as `ssh HOST <wrapper>` children (ssh_launch.h), get --controller / GRAVAC_CONTROLLER
// at the address their host sees this machine at, and keep their socket in <run dir>-node<n> on
// their host. A remote daemon counts as started when its wrapper reports its socket and metrics
// port. Stopping the local ssh child stops the remote process (the wrapper's stdin closes).
//
// Order. With --link, an emulated cluster (netemu::Cluster, one namespace per node, links shaped
// to the given rate) is made first; the controller then runs in node 0's namespace, listening on
// that node's address, and daemon n and its workers run in node n's namespace (UCX over tcp on
// eth0, so data-plane traffic crosses the shaped links). Without it everything runs here and the
// controller listens on 127.0.0.1. The controller is started with --listen HOST:0 --port_file
// and --nodes M; once it wrote its port, the daemons start (--controller, --socket in the run
// folder, --local_size, --node_name, --node_rank, --nodes); once every daemon's socket exists, the
// workers start with GRAVAC_RANK, GRAVAC_SIZE, GRAVAC_LOCAL_RANK, GRAVAC_LOCAL_SIZE,
// GRAVAC_DAEMON_SOCKET (plus GRAVAC_NODE_RANK and GRAVAC_CONTROLLER) set. Ranks are node-major
// (RankLayout).
//
// Metrics. Unless options.metrics is false, the controller and every gravacd get
// --metrics_address=<their address>:0 and --metrics_port_file=<run folder>/controller.metrics.port
// (gravacd-<n>.metrics.port); start-up waits for those files too, then prints one line per process,
// "gravacrun: metrics: controller http://HOST:PORT/metrics" and "gravacrun: metrics: node N
// (nodeN) http://HOST:PORT/metrics". With --link the cluster gets a host link (netemu), so those
// addresses inside the namespaces are reachable from this machine; a cluster too large for one
// (254 nodes) prints how to reach them through `ip netns exec` instead. With metrics false every
// process gets --metrics_address=off. options.metrics_sd_file, when set, is rewritten (tmp +
// rename) each time a target becomes known, as Prometheus file_sd JSON: one group per target with
// labels job="gravac-controller" or job="gravacd" plus node="nodeN". A job that succeeds empties it
// ("[]") at the end; a failed or interrupted job leaves its targets, so Prometheus sees them down.
//
// Host discovery (options.host_discovery_script; an elastic job, docs/ELASTIC.md). The script's
// first good output holding -np slots gives the first nodes (host i = node i, layout as -H). The
// emulated cluster and the node certificates are made for Capacity() nodes (--max-np, or the
// first nodes + 4), so the job can grow into them. While the job runs, Pump runs the script
// about once a second (host_discovery.h, never blocking): a new host gets the next node, its
// gravacd (without --node_rank/--nodes: its workers' placement gives them) and, once that
// listens, its workers with GRAVAC_MEMBERSHIP_VERSION=-1 (they join at the job's next
// membership); a host gone from the output is marked removed, its processes' exits are not
// failures, and its gravacd is stopped once its workers left. After each change the node set is
// written (atomically) to <run dir>/hosts_update, which the workers read at their commits
// (GRAVAC_HOSTS_UPDATE_FILE). Bad output, a failing or hanging run is said once and the last
// good hosts are kept. A host past --max-np ranks or past Capacity() is not started (said once).
// Once a worker finished, discovery stops, and workers still waiting to join are stopped after
// exit_grace.
//
// Output. Every line a child prints is copied to the launcher's stdout or stderr (the one the
// child used), prefixed "[rank r] ", "[gravacd n] " or "[controller] ". The launcher's own lines
// start with "gravacrun: " and go to stderr.
//
// Controller restarts. The controller is not on the critical path (DESIGN.md invariant 4): when
// it exits while workers still run and nothing else failed, it is restarted on the same host,
// port and metrics port after a delay (0.25 s, doubling to at most 4 s), at most
// options.controller_restarts times per job, each logged; the daemons re-join it. Past that
// bound a failing controller fails the job as below.
//
// End. The job succeeds when every worker exits 0; the daemons then get exit_grace to exit on
// their own, after which what is left (the controller) gets SIGTERM, then SIGKILL after
// kill_grace. The first process that fails (a worker, or a daemon or a controller with no restarts left exiting
// non-zero, or killed by a signal) fails the job: everything else gets SIGTERM, then SIGKILL
// after kill_grace, and its exit code (128 + signal when killed) is the job's. SIGINT, SIGTERM or
// SIGHUP to the launcher is forwarded to every child (their process groups) and the job ends
// with 128 + signal; a second one kills at once. Namespaces are deleted on the way out, and by
// netemu's guardian if the launcher itself is killed.
//
// Thread-safety: Run blocks the calling thread and owns SIGINT/SIGTERM/SIGHUP/SIGCHLD in it for
// the duration (blocked and read through a signalfd; the previous mask is restored). Run one
// job at a time per process.
#ifndef GRAVAC_RUNNER_LAUNCHER_H_
#define GRAVAC_RUNNER_LAUNCHER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runner/options.h"

namespace gravac::runner {

struct LaunchIo {
  int out_fd = 1;  // children's stdout, prefixed
  int err_fd = 2;  // children's stderr, prefixed, and the launcher's own messages
};

// Runs the job of `options` (gravacd_path and controller_path must be set: see FindTool).
// Returns the job's exit code as described above; fails (without a child's exit code) when the
// job cannot be set up: a run folder, the cluster, a start that times out.
absl::StatusOr<int> RunJob(const RunnerOptions& options, const LaunchIo& io = {});

// Finds a program: `given` when not empty (must be executable), else `name` in the folder of
// `self_exe`, in `<that folder>/../<build_subdir>` (the build tree) or in env's PATH. NotFound
// lists where it looked.
absl::StatusOr<std::string> FindTool(std::string_view given, std::string_view name,
                                     std::string_view build_subdir, std::string_view self_exe,
                                     const EnvLookup& env);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_LAUNCHER_H_

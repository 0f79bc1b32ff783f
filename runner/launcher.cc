#include "runner/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "netemu/cluster.h"
#include "runner/child.h"
#include "runner/host_discovery.h"
#include "runner/hosts.h"
#include "runner/job_certs.h"
#include "runner/line_prefixer.h"
#include "runner/metrics_targets.h"
#include "runner/ssh_launch.h"

namespace gravac::runner {
namespace {

// After a rank fails, how long the other ranks get to exit (with their own errors) before the
// job is stopped.
constexpr absl::Duration kFailureSettle = absl::Seconds(2);
// Wait before restarting a controller that died; doubles with each restart, up to the maximum.
constexpr absl::Duration kRestartDelay = absl::Milliseconds(250);
constexpr absl::Duration kRestartDelayMax = absl::Seconds(4);
// How often --host-discovery-script runs (Horovod's discovery period).
constexpr absl::Duration kDiscoveryPeriod = absl::Seconds(1);
// Emulated nodes (and node certificates) made for a discovery job without --max-np, beyond the
// first hosts: the nodes it can grow by.
constexpr int kSpareNodes = 4;

enum class Role { kController, kDaemon, kWorker };

struct Proc {
  Proc(Role r, int i, std::string n)
      : role(r),
        index(i),
        name(std::move(n)),
        out(StrCat("[", name, "] ")),
        err(StrCat("[", name, "] ")) {}
  Role role;
  int index;         // node for a daemon, rank for a worker
  int node = -1;     // the node it runs on (-1: none)
  std::string name;  // "rank 3", "gravacd 1", "controller"
  Child child;
  LinePrefixer out;
  LinePrefixer err;
  bool done = false;
  std::string host;                // "" = here; else started over ssh on it
  bool ready = false;              // over ssh: the wrapper reported the ready files
  std::vector<int> ready_values;   // and their numbers (a daemon's metrics port)
};

// A file's whole contents (the job's PEM files, to ship over ssh).
absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::InternalError(StrCat("reading ", path, " failed"));
  return text.str();
}

std::string DescribeExit(const Proc& p) {
  const Child& c = p.child;
  std::string what;
  if (c.killed_by_signal()) {
    what = absl::StrFormat("was killed by signal %d (%s)", c.term_signal(),
                           strsignal(c.term_signal()));
  } else {
    what = absl::StrFormat("exited with code %d", c.exit_code());
  }
  if (p.host.empty()) return what;
  if (c.exit_code() == 255) return StrCat(what, " (ssh to host ", p.host, " failed)");
  if (c.exit_code() == 127) return StrCat(what, " (command not found on host ", p.host, ")");
  return StrCat(what, " on host ", p.host);
}

bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

int ReadPort(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  int port = 0;
  std::string s = text.str();
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &port) || port <= 0 || port > 65535)
    return 0;
  return port;
}

class Job {
 public:
  Job(const RunnerOptions& options, const LaunchIo& io) : options_(options), io_(io) {}
  ~Job() { Teardown(); }

  absl::StatusOr<int> Run() {
    absl::Status s = Setup();
    if (s.ok() && !Stopped() && WholeJob()) s = StartController();
    if (s.ok() && !Stopped() && WholeJob()) s = StartDaemons();
    if (s.ok() && !Stopped()) s = StartWorkers();
    if (s.ok() && !Stopped() && Discovery()) s = WriteHostsUpdate();
    discovering_ = s.ok() && Discovery();
    if (s.ok() && !Stopped()) {
      Pump(absl::InfiniteFuture(), [&] {
        if (Stopped() || AllDone(Role::kWorker)) return true;
        // Workers of a grown node still waiting for a membership when the others finished
        // never get one: they are stopped after exit_grace.
        return finished_at_.has_value() && absl::Now() >= *finished_at_ + options_.exit_grace;
      });
      if (!Stopped() && !AllDone(Role::kWorker)) {
        Say(absl::StrFormat("the job's workers finished; stopping those still waiting to join "
                            "(%s after the first finished)",
                            absl::FormatDuration(options_.exit_grace)));
      }
    }
    if (s.ok() && !Stopped() && Elastic()) {
      // The daemons of an elastic job serve memberships (--serve_jobs) and never exit by
      // themselves; a job none of whose workers finished was lost as a whole.
      const bool any_finished = std::any_of(procs_.begin(), procs_.end(), [](const auto& p) {
        return p->role == Role::kWorker && p->done && p->child.exit_code() == 0;
      });
      if (!any_finished) {
        Say("every worker of the elastic job was lost; the job failed");
        failure_code_ = 1;
      }
    } else if (s.ok() && !Stopped()) {
      bool exited = Pump(absl::Now() + options_.exit_grace,
                         [&] { return Stopped() || AllDone(Role::kDaemon); });
      if (!exited) {
        Say(absl::StrFormat("the daemons did not exit within %s after the workers; stopping them",
                            absl::FormatDuration(options_.exit_grace)));
      }
    }
    Teardown();
    // A job that ended well leaves nothing to scrape; a failed one keeps its (now dead) targets,
    // so Prometheus sees them down (up == 0) and GravacDaemonDown can fire.
    if (s.ok() && !failure_code_.has_value() && signal_ == 0 && !metrics_targets_.empty()) {
      metrics_targets_.clear();
      WriteMetricsSd();
    }
    if (!s.ok()) return s;
    if (failure_code_.has_value()) return *failure_code_;
    if (signal_ != 0) return 128 + signal_;
    return 0;
  }

 private:
  bool Stopped() const { return failure_code_.has_value() || signal_ != 0; }
  bool Elastic() const { return options_.min_np > 0; }
  bool Discovery() const { return !options_.host_discovery_script.empty(); }
  // Nodes the emulated cluster and the certificates are made for (a discovery job grows into
  // them).
  int Capacity() const {
    if (!Discovery()) return options_.nodes;
    const int most = options_.max_np > 0 ? options_.max_np : options_.nodes + kSpareNodes;
    return std::clamp(most, options_.nodes, netemu::kMaxNodes - 1);
  }
  // False with --node: only that node's workers run here.
  bool WholeJob() const { return options_.node < 0; }

  std::vector<NodeRanks> Layout() const {
    return options_.layout.empty() ? RankLayout(options_.np, options_.nodes) : options_.layout;
  }

  bool AllDone(Role role) const {
    return std::all_of(procs_.begin(), procs_.end(),
                       [&](const auto& p) { return p->role != role || p->done; });
  }

  void Say(std::string_view line) { WriteAll(io_.err_fd, StrCat("gravacrun: ", line, "\n")); }

  absl::Status Setup() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
    mask_set_ = true;
    sigfd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd_ < 0) return ErrnoStatus(absl::StatusCode::kInternal, errno, "signalfd failed");

    if (!WholeJob()) return absl::OkStatus();  // no sockets, port files or cluster of ours
    if (options_.run_dir.empty()) {
      char tmpl[] = "/tmp/gravacrun-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) {
        return ErrnoStatus(absl::StatusCode::kInternal, errno,
                           "mkdtemp(/tmp/gravacrun-XXXXXX) failed");
      }
      run_dir_ = tmpl;
      own_run_dir_ = true;
    } else {
      run_dir_ = options_.run_dir;
      std::error_code ec;
      std::filesystem::create_directories(run_dir_, ec);
      if (ec) return absl::InternalError(StrCat("--run_dir ", run_dir_, ": ", ec.message()));
    }
    if (!options_.hosts.empty()) RETURN_IF_ERROR(SetupHosts());
    if (Discovery()) RETURN_IF_ERROR(DiscoverFirstHosts());
    if (options_.link.has_value()) {
      // The host link lets this machine reach the metrics served inside the namespaces.
      const bool host_link = options_.metrics && Capacity() < netemu::kHostLinkByte;
      absl::StatusOr<std::unique_ptr<netemu::Cluster>> cluster = netemu::Cluster::Create(
          Capacity(), *options_.link,
          netemu::ClusterOptions{.name_prefix = "gravacrun", .host_link = host_link});
      if (!cluster.ok() && host_link) {
        // The job does not need the host link: without it, metrics are reached via ip netns exec.
        Say(StrCat("the emulated cluster's host link failed (", cluster.status().message(),
                   "); metrics are served inside the namespaces only"));
        cluster = netemu::Cluster::Create(Capacity(), *options_.link,
                                          netemu::ClusterOptions{.name_prefix = "gravacrun"});
      }
      if (!cluster.ok()) {
        return absl::Status(cluster.status().code(),
                            StrCat("creating the emulated cluster: ", cluster.status().message()));
      }
      cluster_ = std::move(cluster).value();
      Say(absl::StrFormat("emulated cluster %s: %d nodes, links %.4g bit/s, delay %s",
                          cluster_->name(), Capacity(), options_.link->rate_bits_per_s,
                          absl::FormatDuration(options_.link->delay)));
    }
    return absl::OkStatus();
  }

  // Starts a process of node `node` (-1: of none, here): here, in the node's namespace, or over
  // ssh on its host (remote daemons report `ready_files`, see ssh_launch.h).
  absl::StatusOr<Proc*> Start(Role role, int index, std::string name, std::vector<std::string> argv,
                              std::vector<std::pair<std::string, std::string>> env, int node,
                              std::vector<std::string> ready_files = {}) {
    if (options_.verbose) {
      Say(StrCat("starting ", name, Remote(node) ? StrCat(" on host ", node_host_[node]) : "",
                 cluster_ && node >= 0 ? StrCat(" in netns ", cluster_->node_namespace(node)) : "",
                 ": ",
                 absl::StrJoin(argv, " ")));
    }
    ChildOptions co{.argv = std::move(argv),
                    .env = std::move(env),
                    .netns = cluster_ && node >= 0 ? cluster_->node_namespace(node) : ""};
    // A remote process's stdin: the shared lifeline, or with the job's certificates to ship, a
    // pipe of its own that carries them first and is the lifeline after (ssh_launch.h).
    int own_stdin[2] = {-1, -1};
    absl::Cleanup close_read_end = [&] {
      if (own_stdin[0] >= 0) close(own_stdin[0]);
    };
    if (Remote(node)) {
      RemoteCommand remote{.host = node_host_[node],
                           .argv = std::move(co.argv),
                           .env = options_.remote_env,
                           .dir = role == Role::kDaemon ? RemoteDir(node) : "",
                           .remove_dir = role == Role::kDaemon,
                           .ready_files = std::move(ready_files),
                           .kill_grace = options_.kill_grace,
                           .files = {}};
      remote.env.insert(remote.env.end(), co.env.begin(), co.env.end());
      ASSIGN_OR_RETURN(remote.files, RemoteCredentials(role, node));
      ASSIGN_OR_RETURN(std::string payload, RemoteFilesPayload(remote));
      int stdin_fd = lifeline_[0];
      if (!payload.empty()) {
        if (pipe2(own_stdin, O_CLOEXEC) != 0) {
          return ErrnoStatus(absl::StatusCode::kInternal, errno, "pipe2 (ssh stdin) failed");
        }
        remote_stdin_.push_back(own_stdin[1]);
        // A few KiB into an empty pipe: never blocks.
        WriteAll(own_stdin[1], payload);
        stdin_fd = own_stdin[0];
      }
      co = ChildOptions{
          .argv = SshArgv(options_.ssh, remote), .env = {}, .netns = "", .stdin_fd = stdin_fd};
    }
    auto proc = std::make_unique<Proc>(role, index, std::move(name));
    proc->node = node;
    if (Remote(node)) proc->host = node_host_[node];
    absl::StatusOr<Child> child = Child::Start(co);
    if (!child.ok()) {
      return absl::Status(child.status().code(),
                          StrCat("starting ", proc->name, ": ", child.status().message()));
    }
    proc->child = std::move(child).value();
    procs_.push_back(std::move(proc));
    return procs_.back().get();
  }

  // --metrics_address and --metrics_port_file for a process serving on `host` (or off).
  std::vector<std::string> MetricsArgs(const std::string& host, const std::string& port_file) {
    if (!options_.metrics) return {"--metrics_address=off"};
    std::filesystem::remove(port_file);
    return {StrCat("--metrics_address=", host, ":0"), StrCat("--metrics_port_file=", port_file)};
  }

  // Records a process's metrics port, prints where it is served and updates the file_sd file.
  void AddMetricsTarget(MetricsTarget target) {
    if (cluster_ && !cluster_->has_host_link()) {
      target.netns =
          target.node >= 0 ? cluster_->node_namespace(target.node) : cluster_->node_namespace(0);
    }
    Say(StrCat("metrics: ", Describe(target)));
    metrics_targets_.push_back(std::move(target));
    WriteMetricsSd();
  }

  // Rewrites --metrics_sd_file (atomically: Prometheus watches it) with the targets known so far.
  // A failure is reported, not fatal: the job runs without it.
  void WriteMetricsSd() {
    if (options_.metrics_sd_file.empty()) return;
    absl::Status s = WriteFileAtomically(options_.metrics_sd_file, FileSdJson(metrics_targets_));
    if (!s.ok()) Say(StrCat("--metrics_sd_file: ", s.message()));
  }

  // Makes the job's throwaway CA and certificates in a private directory of their own (mode
  // 0700, keys 0600; removed at teardown even with --run_dir), so the control plane is mutual TLS.
  absl::Status MakeCredentials(const std::vector<std::string>& controller_hosts) {
    char tmpl[] = "/tmp/gravacrun-tls-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      return ErrnoStatus(absl::StatusCode::kInternal, errno,
                         "mkdtemp(/tmp/gravacrun-tls-XXXXXX) failed");
    }
    tls_dir_ = tmpl;
    std::vector<std::string> names;
    for (int n = 0; n < Capacity(); ++n) names.push_back(NodeName(n));
    std::vector<std::string> hosts = controller_hosts;
    if (std::find(hosts.begin(), hosts.end(), "127.0.0.1") == hosts.end()) {
      hosts.emplace_back("127.0.0.1");
    }
    absl::StatusOr<JobCredentialFiles> files = WriteJobCredentials(tls_dir_, names, hosts);
    if (!files.ok()) {
      return absl::Status(files.status().code(),
                          StrCat("making the job's TLS certificates: ", files.status().message()));
    }
    tls_ = *std::move(files);
    return absl::OkStatus();
  }

  // The TLS flags of a process holding certs[i] / keys[i], or --insecure_plaintext without the
  // job's certificates (hosts over ssh with a controller of the user's). A process on another
  // host gets none: its certificates travel with it (RemoteCredentials) as GRAVAC_TLS_*.
  std::vector<std::string> SecurityArgs(const std::vector<std::string>& certs,
                                        const std::vector<std::string>& keys, int i,
                                        bool remote = false) const {
    if (tls_.ca.empty()) return {"--insecure_plaintext"};
    if (remote) return {};
    return {StrCat("--tls_cert=", certs[i]), StrCat("--tls_key=", keys[i]),
            StrCat("--tls_ca=", tls_.ca)};
  }

  // The job's certificate files that a process of `role` on node `node`'s remote host needs, as
  // the GRAVAC_TLS_* variables the wrapper sets: the CA, and the node's certificate (gravacd) or
  // gravacctl's (a worker). None without the job's certificates.
  absl::StatusOr<std::vector<RemoteFile>> RemoteCredentials(Role role, int node) const {
    if (tls_.ca.empty() || role == Role::kController) return std::vector<RemoteFile>{};
    const bool daemon = role == Role::kDaemon;
    const std::string& cert = daemon ? tls_.node_cert[node] : tls_.client_cert;
    const std::string& key = daemon ? tls_.node_key[node] : tls_.client_key;
    std::vector<RemoteFile> files;
    for (const auto& [env, name, path] :
         {std::tuple<std::string, std::string, std::string>{"GRAVAC_TLS_CA", "ca.crt", tls_.ca},
          {"GRAVAC_TLS_CERT", "tls.crt", cert},
          {"GRAVAC_TLS_KEY", "tls.key", key}}) {
      ASSIGN_OR_RETURN(std::string contents, ReadText(path));
      files.push_back({.env = env, .name = name, .contents = std::move(contents)});
    }
    return files;
  }

  // gravac-controller's command line, listening on `port` and serving metrics on `metrics_port`
  // of `host` (0 = a free port, written to the port files).
  std::vector<std::string> ControllerArgv(const std::string& host, int port, int metrics_port) {
    const std::string port_file = StrCat(run_dir_, "/controller.port");
    const std::string metrics_file = StrCat(run_dir_, "/controller.metrics.port");
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {options_.controller_path,
                                     StrCat("--listen=", host, ":", port),
                                     StrCat("--port_file=", port_file),
                                     StrCat("--nodes=", options_.nodes)};
    if (options_.regroup_timeout > absl::ZeroDuration()) {
      argv.push_back(
          StrCat("--regroup_timeout_s=", absl::ToDoubleSeconds(options_.regroup_timeout)));
    }
    if (options_.elastic_timeout > absl::ZeroDuration()) {
      argv.push_back(
          StrCat("--new_node_wait_s=", absl::ToDoubleSeconds(options_.elastic_timeout)));
    }
    std::vector<std::string> security =
        SecurityArgs({tls_.controller_cert}, {tls_.controller_key}, 0);
    argv.insert(argv.end(), security.begin(), security.end());
    std::vector<std::string> metrics = MetricsArgs(host, metrics_file);
    if (options_.metrics) metrics[0] = StrCat("--metrics_address=", host, ":", metrics_port);
    argv.insert(argv.end(), metrics.begin(), metrics.end());
    argv.insert(argv.end(), options_.controller_args.begin(), options_.controller_args.end());
    return argv;
  }

  absl::Status StartController() {
    if (!options_.hosts.empty() && !options_.controller.empty()) {
      controller_address_ = options_.controller;
      Say(StrCat("using the controller at ", controller_address_));
      return absl::OkStatus();
    }
    // With hosts over ssh the controller listens on every address; they reach it at the address
    // they see this machine at (HostProbe::self_address).
    const bool wildcard = std::any_of(node_probe_.begin(), node_probe_.end(), [](const auto& p) {
      return !p.self_address.empty();
    });
    const bool v6 = std::any_of(node_probe_.begin(), node_probe_.end(), [](const auto& p) {
      return p.self_address.find(':') != std::string::npos;
    });
    const std::string host =
        cluster_ ? cluster_->node_address(0) : wildcard ? (v6 ? "[::]" : "0.0.0.0") : "127.0.0.1";
    // Mutual TLS, also over ssh: the remote processes get their certificates through their ssh
    // channel (RemoteCredentials); the controller's names every address the daemons dial.
    std::vector<std::string> names = {wildcard ? "127.0.0.1" : host};
    for (const HostProbe& p : node_probe_) {
      if (!p.self_address.empty() &&
          std::find(names.begin(), names.end(), p.self_address) == names.end()) {
        names.push_back(p.self_address);
      }
    }
    RETURN_IF_ERROR(MakeCredentials(names));
    const std::string port_file = StrCat(run_dir_, "/controller.port");
    const std::string metrics_file = StrCat(run_dir_, "/controller.metrics.port");
    ASSIGN_OR_RETURN(Proc * controller, Start(Role::kController, 0, "controller",
                                              ControllerArgv(host, 0, 0), {},
                                              ControllerNode()));
    int port = 0;
    int metrics_port = 0;
    bool ready = Pump(absl::Now() + options_.start_timeout, [&] {
      port = ReadPort(port_file);
      if (options_.metrics) metrics_port = ReadPort(metrics_file);
      return (port > 0 && (!options_.metrics || metrics_port > 0)) || Stopped() || controller->done;
    });
    if (Stopped()) return absl::OkStatus();
    if (!ready || controller->done) {
      const bool listened = port > 0;
      if (controller->done) {
        Say(listened ? "the controller exited before it served its metrics"
                     : "the controller exited before it listened");
        failure_code_ = std::max(controller->child.exit_code(), 1);
        return absl::OkStatus();
      }
      return absl::DeadlineExceededError(
          absl::StrFormat("gravac-controller did not write its %s to %s within %s",
                          listened ? "metrics port" : "port", listened ? metrics_file : port_file,
                          absl::FormatDuration(options_.start_timeout)));
    }
    controller_host_ = host;
    controller_port_ = port;
    controller_metrics_port_ = metrics_port;
    controller_address_ = wildcard ? HostPort("127.0.0.1", port) : StrCat(host, ":", port);
    std::string ctl = StrCat("gravacctl status --controller ", controller_address_);
    if (!options_.job.name.empty()) ctl = StrCat(ctl, " --job ", options_.job.name);
    if (!options_.job.run_id.empty()) ctl = StrCat(ctl, " --run_id ", options_.job.run_id);
    if (!tls_.ca.empty()) {
      ctl = StrCat(ctl, " --tls_ca ", tls_.ca, " --tls_cert ", tls_.client_cert, " --tls_key ",
                   tls_.client_key);
    } else {
      ctl = StrCat(ctl, " --insecure_plaintext");
    }
    Say(StrCat("controller listening on ", controller_address_, "; status: ",
               cluster_ ? StrCat("ip netns exec ", cluster_->node_namespace(0), " ") : "", ctl));
    if (options_.metrics) {
      const std::string me = LocalHostname();
      AddMetricsTarget({.job = kControllerJob,
                        .node = -1,
                        .host = wildcard ? (me.empty() ? "127.0.0.1" : me) : host,
                        .port = metrics_port,
                        .netns = ""});
    }
    return absl::OkStatus();
  }

  // Whether a controller that just exited is restarted: it had started, the job still runs
  // (workers left, nothing failed, no signal) and restarts are left. The daemons keep training
  // on the last decision meanwhile and re-join the new one (DESIGN.md invariant 4).
  bool RestartsController() const {
    return WholeJob() && !controller_address_.empty() && !stopping_ && !Stopped() &&
           !AllDone(Role::kWorker) && controller_restarts_ < options_.controller_restarts;
  }

  // Starts the controller again on the address (and metrics port) the daemons and workers know.
  void RestartController() {
    restart_at_.reset();
    ++controller_restarts_;
    absl::StatusOr<Proc*> p =
        Start(Role::kController, 0, "controller",
              ControllerArgv(controller_host_, controller_port_, controller_metrics_port_), {},
              ControllerNode());
    if (!p.ok()) {
      Say(StrCat("restarting the controller failed: ", p.status().message(), "; stopping the job"));
      if (!failure_code_.has_value()) failure_code_ = 1;
      return;
    }
    awaiting_controller_ = *p;
  }

  // Says once when a restarted controller listens again.
  void CheckRestartedController() {
    if (awaiting_controller_ == nullptr || awaiting_controller_->done) return;
    if (ReadPort(StrCat(run_dir_, "/controller.port")) <= 0) return;
    awaiting_controller_ = nullptr;
    Say(absl::StrFormat("controller restarted (%d of at most %d), listening on %s again",
                        controller_restarts_, options_.controller_restarts, controller_address_));
  }

  // The address daemon `node` serves its metrics on: its node's, or the loopback.
  std::string DaemonHost(int node) const {
    if (Remote(node)) return node_host_[node];
    return cluster_ ? cluster_->node_address(node) : "127.0.0.1";
  }

  // The controller runs in node 0's namespace with --link, else here (never over ssh).
  int ControllerNode() const { return cluster_ ? 0 : -1; }

  // True when node `node` runs on another host, over ssh.
  bool Remote(int node) const {
    return node >= 0 && static_cast<size_t>(node) < node_host_.size() && !node_host_[node].empty();
  }
  // The folder of a remote node's socket and port files, on its host (removed at its end).
  std::string RemoteDir(int node) const { return StrCat(run_dir_, "-node", node); }
  // The socket of node `node`'s gravacd (on its host).
  std::string DaemonSocket(int node) const {
    return StrCat(Remote(node) ? RemoteDir(node) : run_dir_, "/gravacd-", node, ".sock");
  }
  // The controller's address as node `node` reaches it.
  std::string ControllerFor(int node) const {
    if (!Remote(node) || (!options_.hosts.empty() && !options_.controller.empty())) {
      return controller_address_;
    }
    return HostPort(node_probe_[node].self_address, controller_port_);
  }

  // Which nodes run elsewhere; probes those hosts over ssh (all at once) before anything starts.
  absl::Status SetupHosts() {
    const std::string me = LocalHostname();
    node_host_.assign(options_.nodes, "");
    node_probe_.assign(options_.nodes, HostProbe{});
    std::vector<std::string> remote;
    for (int n = 0; n < options_.nodes && static_cast<size_t>(n) < options_.hosts.size(); ++n) {
      const std::string& h = options_.hosts[n];
      if (IsThisMachine(h, me)) continue;
      node_host_[n] = h;
      if (std::find(remote.begin(), remote.end(), h) == remote.end()) remote.push_back(h);
    }
    if (remote.empty()) return absl::OkStatus();
    Say(StrCat("reaching ", remote.size(), " host(s) over ssh: ", absl::StrJoin(remote, ", ")));
    ASSIGN_OR_RETURN(std::vector<HostProbe> probes,
                     ProbeHosts(options_.ssh, remote, options_.remote_gravacd));
    for (int n = 0; n < options_.nodes; ++n) {
      for (const HostProbe& p : probes) {
        if (Remote(n) && p.host == node_host_[n]) node_probe_[n] = p;
      }
    }
    if (pipe2(lifeline_, O_CLOEXEC) != 0) {
      return ErrnoStatus(absl::StatusCode::kInternal, errno, "pipe2 (ssh lifeline) failed");
    }
    return absl::OkStatus();
  }

  std::vector<std::string> DaemonArgs(int node) const {
    std::vector<std::string> args;
    const std::string index = StrCat(node);
    for (const std::string& a : options_.daemon_args) {
      std::string arg = absl::StrReplaceAll(a, {{"{node}", index}});
      if (absl::StartsWith(a, "--step_log=") && a.find("{node}") == std::string::npos &&
          options_.nodes > 1) {
        arg = StrCat(arg, ".", node);
      }
      args.push_back(std::move(arg));
    }
    return args;
  }

  // Node `node`'s gravacd command line; `first` for a node of membership 0 (a node a discovery
  // job grows onto learns its node rank from its workers' placement).
  std::vector<std::string> DaemonArgv(int n, const std::string& socket,
                                      const std::string& metrics_file, bool first) {
    const bool remote = Remote(n);
    std::vector<std::string> argv = {remote ? node_probe_[n].gravacd : options_.gravacd_path,
                                     StrCat("--controller=", ControllerFor(n)),
                                     StrCat("--socket=", socket),
                                     StrCat("--local_size=", layout_[n].local_size),
                                     StrCat("--node_name=", NodeName(n))};
    if (first) {
      argv.push_back(StrCat("--node_rank=", n));
      argv.push_back(StrCat("--nodes=", options_.nodes));
    }
    if (!options_.job.name.empty()) argv.push_back(StrCat("--job_name=", options_.job.name));
    if (!options_.job.run_id.empty()) argv.push_back(StrCat("--run_id=", options_.job.run_id));
    if (Elastic()) argv.push_back("--serve_jobs");  // one session per membership
    std::vector<std::string> security = SecurityArgs(tls_.node_cert, tls_.node_key, n, remote);
    argv.insert(argv.end(), security.begin(), security.end());
    std::vector<std::string> metrics =
        MetricsArgs(remote ? "0.0.0.0" : DaemonHost(n), metrics_file);
    argv.insert(argv.end(), metrics.begin(), metrics.end());
    std::vector<std::string> extra = DaemonArgs(n);
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  absl::Status StartDaemons() {
    layout_ = Layout();
    std::vector<std::string> sockets;
    std::vector<std::string> metrics_files;
    std::vector<Proc*> daemons;
    for (int n = 0; n < options_.nodes; ++n) {
      const bool remote = Remote(n);
      sockets.push_back(DaemonSocket(n));
      metrics_files.push_back(
          StrCat(remote ? RemoteDir(n) : run_dir_, "/gravacd-", n, ".metrics.port"));
      if (!remote) std::filesystem::remove(sockets.back());
      std::vector<std::string> argv = DaemonArgv(n, sockets.back(), metrics_files.back(), true);
      std::vector<std::string> ready;
      if (remote) ready = {sockets.back()};
      if (remote && options_.metrics) ready.push_back(metrics_files.back());
      ASSIGN_OR_RETURN(Proc * d,
                       Start(Role::kDaemon, n, StrCat("gravacd ", n), argv, {}, n, ready));
      daemons.push_back(d);
    }
    Proc* early = nullptr;
    std::vector<int> metrics_ports(options_.nodes, 0);
    // A local daemon is ready once its socket and metrics-port file exist; a remote one when its
    // wrapper says so (with the port).
    auto node_ready = [&](int n) {
      if (Remote(n)) {
        Proc* d = daemons[n];
        if (d->ready && options_.metrics && !d->ready_values.empty()) {
          metrics_ports[n] = d->ready_values[0];
        }
        return d->ready && (!options_.metrics || metrics_ports[n] > 0);
      }
      if (options_.metrics && metrics_ports[n] <= 0) metrics_ports[n] = ReadPort(metrics_files[n]);
      return (!options_.metrics || metrics_ports[n] > 0) && std::filesystem::exists(sockets[n]);
    };
    bool ready = Pump(absl::Now() + options_.start_timeout, [&] {
      for (Proc* d : daemons) {
        if (d->done) early = d;
      }
      bool all = true;
      for (int n = 0; n < options_.nodes; ++n) all = node_ready(n) && all;
      return Stopped() || early != nullptr || all;
    });
    if (Stopped()) return absl::OkStatus();
    if (early != nullptr) {
      Say(StrCat(early->name, " ", DescribeExit(*early), " before opening its socket"));
      failure_code_ = std::max(early->child.exit_code(), 1);
      return absl::OkStatus();
    }
    if (!ready) {
      std::vector<std::string> missing;
      for (int n = 0; n < options_.nodes; ++n) {
        if (Remote(n)) {
          if (!node_ready(n)) {
            missing.push_back(StrCat(sockets[n], " on host ", node_host_[n]));
          }
          continue;
        }
        if (!std::filesystem::exists(sockets[n])) missing.push_back(sockets[n]);
        if (options_.metrics && metrics_ports[n] <= 0) missing.push_back(metrics_files[n]);
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "the daemons did not open their sockets and write their metrics ports within %s; "
          "missing: %s",
          absl::FormatDuration(options_.start_timeout), absl::StrJoin(missing, ", ")));
    }
    for (int n = 0; options_.metrics && n < options_.nodes; ++n) {
      AddMetricsTarget({.job = kDaemonJob,
                        .node = n,
                        .host = DaemonHost(n),
                        .port = metrics_ports[n],
                        .netns = ""});
    }
    return absl::OkStatus();
  }

  absl::Status StartWorkers() {
    if (layout_.empty()) layout_ = Layout();
    for (int n = 0; n < options_.nodes; ++n) {
      if (!WholeJob() && n != options_.node) continue;
      const NodeRanks& node = layout_[n];
      const std::string socket = WholeJob() ? DaemonSocket(n) : options_.daemon_socket;
      const std::string controller = WholeJob() ? ControllerFor(n) : options_.controller;
      for (int local = 0; local < node.local_size; ++local) {
        const int rank = node.first_rank + local;
        std::vector<std::pair<std::string, std::string>> env = {
            {"GRAVAC_RANK", StrCat(rank)},        {"GRAVAC_SIZE", StrCat(options_.np)},
            {"GRAVAC_LOCAL_RANK", StrCat(local)}, {"GRAVAC_LOCAL_SIZE", StrCat(node.local_size)},
            {"GRAVAC_NODE_RANK", StrCat(n)},      {"GRAVAC_NODES", StrCat(options_.nodes)},
            {"GRAVAC_DAEMON_SOCKET", socket}};
        if (!controller.empty()) env.emplace_back("GRAVAC_CONTROLLER", controller);
        AddWorkerEnv(n, env);
        RETURN_IF_ERROR(
            Start(Role::kWorker, rank, StrCat("rank ", rank), options_.command, env, n).status());
      }
    }
    return absl::OkStatus();
  }

  // The job-wide part of a worker's environment on node `n`.
  void AddWorkerEnv(int n, std::vector<std::pair<std::string, std::string>>& env) const {
    if (!options_.job.name.empty()) env.emplace_back("GRAVAC_JOB_NAME", options_.job.name);
    if (!options_.job.run_id.empty()) env.emplace_back("GRAVAC_RUN_ID", options_.job.run_id);
    if (Elastic()) {
      env.emplace_back("GRAVAC_ELASTIC", "1");
      env.emplace_back("GRAVAC_MIN_NP", StrCat(options_.min_np));
      env.emplace_back("GRAVAC_MAX_NP", StrCat(options_.max_np));
      env.emplace_back("GRAVAC_NODE_NAME", NodeName(n));
      if (options_.reset_limit > 0) {
        env.emplace_back("GRAVAC_RESET_LIMIT", StrCat(options_.reset_limit));
      }
    }
    if (Discovery()) env.emplace_back("GRAVAC_HOSTS_UPDATE_FILE", HostsUpdateFile());
    if (!tls_.ca.empty() && !Remote(n)) {  // gravacctl from a rank reaches the controller
      env.emplace_back("GRAVAC_TLS_CA", tls_.ca);
      env.emplace_back("GRAVAC_TLS_CERT", tls_.client_cert);
      env.emplace_back("GRAVAC_TLS_KEY", tls_.client_key);
    }
  }

  // ---- Host discovery (--host-discovery-script) ----

  bool Removed(int node) const {
    return node >= 0 && static_cast<size_t>(node) < host_nodes_.size() &&
           host_nodes_[node].state == HostNode::State::kRemoved;
  }
  std::string HostsUpdateFile() const { return StrCat(run_dir_, "/hosts_update"); }

  // The first hosts: the script's first good output holding -np ranks (retried once a second up
  // to start_timeout while it holds fewer; bad output fails at once). Sets nodes and layout.
  absl::Status DiscoverFirstHosts() {
    discovery_ = std::make_unique<HostDiscovery>(options_.host_discovery_script, options_.slots,
                                                 options_.host_discovery_timeout);
    const absl::Time deadline = absl::Now() + options_.start_timeout;
    bool said = false;
    while (true) {
      absl::StatusOr<std::vector<HostSlots>> hosts = discovery_->RunOnce();
      if (!hosts.ok()) {
        return absl::Status(hosts.status().code(),
                            StrCat("the first host discovery failed: ", hosts.status().message()));
      }
      int slots = 0;
      for (const HostSlots& h : *hosts) slots += h.slots;
      if (slots >= options_.np) {
        std::vector<HostSlots> used = *hosts;
        ASSIGN_OR_RETURN(std::vector<int> ranks, FillHosts(&used, options_.np));
        options_.nodes = static_cast<int>(used.size());
        options_.layout.clear();
        int first = 0;
        std::vector<std::string> where;
        for (size_t i = 0; i < used.size(); ++i) {
          options_.layout.push_back({first, ranks[i]});
          first += ranks[i];
          host_nodes_.push_back({.host = used[i].host,
                                 .slots = ranks[i],
                                 .state = HostNode::State::kRunning,
                                 .started = absl::Now(),
                                 .daemon_stopped = false});
          where.push_back(absl::StrFormat("%s -> %s (%d ranks)", used[i].host, NodeName(i),
                                          ranks[i]));
        }
        Say(StrCat("host discovery: starting on ", absl::StrJoin(where, ", ")));
        return absl::OkStatus();
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "--host-discovery-script %s printed %d slots, fewer than -np %d, for %s "
            "(--start_timeout_s)",
            options_.host_discovery_script, slots, options_.np,
            absl::FormatDuration(options_.start_timeout)));
      }
      if (!said) {
        Say(absl::StrFormat("host discovery: %d slots, waiting for -np %d", slots, options_.np));
        said = true;
      }
      Pump(absl::Now() + kDiscoveryPeriod, [&] { return Stopped(); });
      if (Stopped()) return absl::OkStatus();
    }
  }

  // One step of discovery, from Pump: runs the script once a second, applies good output,
  // starts the workers of nodes whose daemon is up and stops the daemons of removed nodes.
  void DriveDiscovery() {
    const absl::Time now = absl::Now();
    if (!discovery_->running()) {
      if (now >= next_discovery_) {
        next_discovery_ = now + kDiscoveryPeriod;
        if (absl::Status s = discovery_->Start(now); !s.ok()) DiscoveryFailed(s);
      }
    } else if (auto result = discovery_->Poll(now)) {
      if (result->ok()) {
        ApplyHosts(**result);
      } else {
        DiscoveryFailed(result->status());
      }
    }
    AdvanceNodes(now);
  }

  // A bad run keeps the last good hosts (Horovod's behaviour); each new error is said once.
  void DiscoveryFailed(const absl::Status& why) {
    if (why.message() == last_discovery_error_) return;
    last_discovery_error_ = std::string(why.message());
    Say(StrCat("host discovery: ", why.message(), "; keeping the last good hosts (retried every ",
               absl::FormatDuration(kDiscoveryPeriod), ")"));
  }

  int ActiveRanks() const {
    int ranks = 0;
    for (const HostNode& h : host_nodes_) {
      if (h.state != HostNode::State::kRemoved) ranks += h.slots;
    }
    return ranks;
  }

  void ApplyHosts(const std::vector<HostSlots>& hosts) {
    if (!last_discovery_error_.empty()) {
      Say("host discovery: the script's output is good again");
      last_discovery_error_.clear();
    }
    auto listed = [&](const std::string& host) {
      return std::any_of(hosts.begin(), hosts.end(),
                         [&](const HostSlots& h) { return h.host == host; });
    };
    bool changed = false;
    for (size_t n = 0; n < host_nodes_.size(); ++n) {
      HostNode& node = host_nodes_[n];
      if (node.state == HostNode::State::kRemoved || listed(node.host)) continue;
      const bool was_running = node.state == HostNode::State::kRunning;
      node.state = HostNode::State::kRemoved;
      Say(absl::StrFormat("host discovery: host %s (%s) is gone; %s", node.host, NodeName(n),
                          was_running ? "it leaves the job at the next commit"
                                      : "stopping it (it had not joined yet)"));
      if (was_running) {
        changed = true;
      } else {
        for (auto& p : procs_) {
          if (p->node == static_cast<int>(n) && p->role != Role::kController && !p->done) {
            p->child.SignalGroup(SIGTERM);
          }
        }
        node.daemon_stopped = true;
      }
    }
    for (auto it = refused_hosts_.begin(); it != refused_hosts_.end();) {
      it = listed(*it) ? std::next(it) : refused_hosts_.erase(it);
    }
    for (const HostSlots& h : hosts) {
      const bool active = std::any_of(host_nodes_.begin(), host_nodes_.end(), [&](const auto& n) {
        return n.host == h.host && n.state != HostNode::State::kRemoved;
      });
      if (active || refused_hosts_.count(h.host) > 0) continue;
      std::string refused;
      if (options_.max_np > 0 && ActiveRanks() + h.slots > options_.max_np) {
        refused = absl::StrFormat("the job would have %d ranks, above --max-np %d",
                                  ActiveRanks() + h.slots, options_.max_np);
      } else if (static_cast<int>(host_nodes_.size()) >= Capacity()) {
        refused = absl::StrFormat("the %d nodes made for this job are used (--max-np sets how "
                                  "many)",
                                  Capacity());
      } else if (absl::Status s = StartNode(h); !s.ok()) {
        refused = std::string(s.message());
      }
      if (!refused.empty()) {
        Say(StrCat("host discovery: host ", h.host, " not added: ", refused));
        refused_hosts_.insert(h.host);
      }
    }
    if (changed) {
      if (absl::Status s = WriteHostsUpdate(); !s.ok()) Say(StrCat("host discovery: ", s.message()));
    }
  }

  // Starts a discovered host's gravacd (its workers follow once it listens: AdvanceNodes).
  absl::Status StartNode(const HostSlots& h) {
    const int n = static_cast<int>(host_nodes_.size());
    host_nodes_.push_back({.host = h.host,
                           .slots = h.slots,
                           .state = HostNode::State::kStarting,
                           .started = absl::Now(),
                           .daemon_stopped = false});
    layout_.push_back({0, h.slots});
    const std::string socket = DaemonSocket(n);
    std::filesystem::remove(socket);
    Say(absl::StrFormat("host discovery: host %s appeared; starting %s (%d ranks)%s", h.host,
                        NodeName(n), h.slots,
                        cluster_ ? StrCat(" in netns ", cluster_->node_namespace(n)) : ""));
    absl::StatusOr<Proc*> d = Start(Role::kDaemon, n, StrCat("gravacd ", n),
                                    DaemonArgv(n, socket, DaemonMetricsFile(n), false), {}, n);
    if (!d.ok()) {
      host_nodes_[n].state = HostNode::State::kRemoved;
      host_nodes_[n].daemon_stopped = true;
      return d.status();
    }
    return absl::OkStatus();
  }

  std::string DaemonMetricsFile(int n) const { return StrCat(run_dir_, "/gravacd-", n, ".metrics.port"); }

  // Nodes whose daemon now listens get their workers (and the update that lets the job grow onto
  // them); removed nodes whose workers left get their daemon stopped.
  void AdvanceNodes(absl::Time now) {
    bool changed = false;
    for (size_t i = 0; i < host_nodes_.size(); ++i) {
      const int n = static_cast<int>(i);
      HostNode& node = host_nodes_[i];
      if (node.state == HostNode::State::kStarting) {
        const Proc* daemon = nullptr;
        for (auto& p : procs_) {
          if (p->role == Role::kDaemon && p->node == n) daemon = p.get();
        }
        const int metrics_port = options_.metrics ? ReadPort(DaemonMetricsFile(n)) : 0;
        const bool ready = std::filesystem::exists(DaemonSocket(n)) &&
                           (!options_.metrics || metrics_port > 0);
        if (daemon == nullptr || daemon->done || (!ready && now > node.started + options_.start_timeout)) {
          Say(absl::StrFormat("host discovery: %s of host %s %s; the host is not added",
                              daemon == nullptr ? "gravacd" : daemon->name, node.host,
                              daemon != nullptr && daemon->done ? DescribeExit(*daemon)
                                                               : "did not open its socket"));
          for (auto& p : procs_) {
            if (p->node == n && p->role != Role::kController && !p->done) {
              p->child.SignalGroup(SIGTERM);
            }
          }
          node.state = HostNode::State::kRemoved;
          node.daemon_stopped = true;
          continue;
        }
        if (!ready) continue;
        if (options_.metrics) {
          AddMetricsTarget(
              {.job = kDaemonJob, .node = n, .host = DaemonHost(n), .port = metrics_port, .netns = ""});
        }
        if (absl::Status s = StartJoiningWorkers(n); !s.ok()) {
          Say(StrCat("host discovery: starting the workers of ", NodeName(n), ": ", s.message()));
        }
        node.state = HostNode::State::kRunning;
        changed = true;
      } else if (node.state == HostNode::State::kRemoved && !node.daemon_stopped) {
        const bool workers_left = std::all_of(procs_.begin(), procs_.end(), [&](const auto& p) {
          return p->role != Role::kWorker || p->node != n || p->done;
        });
        if (!workers_left) continue;
        for (auto& p : procs_) {
          if (p->node == n && p->role != Role::kController && !p->done) {
            p->child.SignalGroup(SIGTERM);
          }
        }
        node.daemon_stopped = true;
      }
    }
    if (changed) {
      if (absl::Status s = WriteHostsUpdate(); !s.ok()) Say(StrCat("host discovery: ", s.message()));
    }
  }

  // The workers of a node the job grows onto: they ask for their place (membership -1) in
  // hvd.init() and get it when the running workers regroup at their next commit.
  absl::Status StartJoiningWorkers(int n) {
    const int slots = layout_[n].local_size;
    for (int local = 0; local < slots; ++local) {
      std::vector<std::pair<std::string, std::string>> env = {
          {"GRAVAC_RANK", StrCat(local)},       {"GRAVAC_SIZE", StrCat(slots)},
          {"GRAVAC_LOCAL_RANK", StrCat(local)}, {"GRAVAC_LOCAL_SIZE", StrCat(slots)},
          {"GRAVAC_NODE_RANK", "0"},            {"GRAVAC_NODES", "1"},
          {"GRAVAC_DAEMON_SOCKET", DaemonSocket(n)},
          {"GRAVAC_MEMBERSHIP_VERSION", "-1"},  {"GRAVAC_FIRST_RUN_ID", options_.job.run_id}};
      env.emplace_back("GRAVAC_CONTROLLER", ControllerFor(n));
      AddWorkerEnv(n, env);
      RETURN_IF_ERROR(Start(Role::kWorker, -1, absl::StrFormat("%s local %d", NodeName(n), local),
                            options_.command, env, n)
                          .status());
    }
    return absl::OkStatus();
  }

  // Tells the running workers the nodes the job should now have (read by rank 0 at each commit:
  // gravac.common.elastic): "serial N", "nodes a,b,...", "added ...", "removed ..." lines, written
  // atomically.
  absl::Status WriteHostsUpdate() {
    std::vector<std::string> nodes;
    for (size_t n = 0; n < host_nodes_.size(); ++n) {
      if (host_nodes_[n].state == HostNode::State::kRunning) nodes.push_back(NodeName(n));
    }
    std::vector<std::string> added, removed;
    for (const std::string& n : nodes) {
      if (std::find(written_nodes_.begin(), written_nodes_.end(), n) == written_nodes_.end()) {
        added.push_back(n);
      }
    }
    for (const std::string& n : written_nodes_) {
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) removed.push_back(n);
    }
    const int serial = wrote_hosts_ ? hosts_serial_ + 1 : 0;  // 0: the first hosts
    RETURN_IF_ERROR(WriteFileAtomically(
        HostsUpdateFile(),
        absl::StrFormat("serial %d\nnodes %s\nadded %s\nremoved %s\n", serial,
                        absl::StrJoin(nodes, ","), absl::StrJoin(added, ","),
                        absl::StrJoin(removed, ","))));
    if (serial > 0) {
      Say(absl::StrFormat("hosts updated (%d): nodes %s (added: %s; removed: %s); the job "
                          "regroups at its next commit",
                          serial, absl::StrJoin(nodes, ", "),
                          added.empty() ? "none" : absl::StrJoin(added, ", "),
                          removed.empty() ? "none" : absl::StrJoin(removed, ", ")));
    }
    hosts_serial_ = serial;
    wrote_hosts_ = true;
    written_nodes_ = std::move(nodes);
    return absl::OkStatus();
  }

  // Drives output, signals and exits until `until` holds (true) or `deadline` passes (false).
  bool Pump(absl::Time deadline, const std::function<bool()>& until) {
    std::vector<char> buf(64 * 1024);
    while (true) {
      for (auto& p : procs_) {
        if (!p->done && p->child.TryReap()) OnExit(*p);
      }
      if (restart_at_.has_value() && absl::Now() >= *restart_at_) {
        if (RestartsController()) {
          RestartController();
        } else {
          restart_at_.reset();
        }
      }
      CheckRestartedController();
      if (discovering_ && !stopping_ && !Stopped() && !finished_at_.has_value()) DriveDiscovery();
      if (until()) return true;
      const absl::Time now = absl::Now();
      if (now >= deadline) return false;
      std::vector<pollfd> fds = {{sigfd_, POLLIN, 0}};
      std::vector<Proc*> owners = {nullptr};
      for (auto& p : procs_) {
        for (int fd : {p->child.stdout_fd(), p->child.stderr_fd()}) {
          if (fd < 0) continue;
          fds.push_back({fd, POLLIN, 0});
          owners.push_back(p.get());
        }
      }
      // At most 100 ms; an infinite deadline must not overflow into a zero timeout (a busy loop).
      const absl::Duration left = deadline - now;
      const int wait_ms = left >= absl::Milliseconds(100)
                              ? 100
                              : static_cast<int>(absl::ToInt64Milliseconds(left) + 1);
      if (poll(fds.data(), fds.size(), wait_ms) < 0) continue;  // EINTR
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (owners[i] == nullptr) {
          HandleSignals();
          continue;
        }
        Proc& p = *owners[i];
        const bool is_out = fds[i].fd == p.child.stdout_fd();
        LinePrefixer& prefixer = is_out ? p.out : p.err;
        const int sink = is_out ? io_.out_fd : io_.err_fd;
        ssize_t n = read(fds[i].fd, buf.data(), buf.size());
        std::string text;
        if (n > 0) {
          prefixer.Feed(std::string_view(buf.data(), static_cast<size_t>(n)), &text);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          prefixer.Finish(&text);
          p.child.CloseOutput(fds[i].fd);
        }
        if (!p.host.empty() && !is_out && TakeReadyLine(&text, prefixer.prefix(), &p.ready_values)) {
          p.ready = true;
        }
        WriteAll(sink, text);
      }
    }
  }

  void HandleSignals() {
    signalfd_siginfo info;
    while (read(sigfd_, &info, sizeof(info)) == sizeof(info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // exits are reaped by Pump
      if (signal_ == 0 && !stopping_) {
        signal_ = sig;
        Say(absl::StrFormat("got %s; forwarding it to the job", strsignal(sig)));
        SignalAll(sig);
      } else {
        Say(absl::StrFormat("got %s while stopping; killing the job", strsignal(sig)));
        if (signal_ == 0) signal_ = sig;
        for (auto& p : procs_) p->child.KillGroup();
      }
    }
  }

  void OnExit(Proc& p) {
    p.done = true;
    if (p.role == Role::kController && RestartsController()) {
      const absl::Duration delay =
          std::min(kRestartDelay * (1 << std::min(controller_restarts_, 8)), kRestartDelayMax);
      Say(absl::StrFormat("controller %s; restarting it on %s in %s (restart %d of at most %d, "
                          "--controller_restarts); training continues meanwhile",
                          DescribeExit(p), controller_address_, absl::FormatDuration(delay),
                          controller_restarts_ + 1, options_.controller_restarts));
      restart_at_ = absl::Now() + delay;
      return;
    }
    if (p.role == Role::kController && WholeJob() && !stopping_ && !Stopped() &&
        controller_restarts_ >= options_.controller_restarts && p.child.exit_code() != 0) {
      Say(absl::StrFormat("the controller was restarted %d times (--controller_restarts); not "
                          "again",
                          controller_restarts_));
    }
    if (p.role != Role::kController && Removed(p.node)) {  // a host the discovery script dropped: its processes leave
      Say(StrCat(p.name, " (host ", host_nodes_[p.node].host, ", removed) ", DescribeExit(p)));
      return;
    }
    if (Discovery() && p.role == Role::kWorker && p.child.exit_code() == 0 &&
        !finished_at_.has_value()) {
      finished_at_ = absl::Now();
    }
    if (stopping_ || p.child.exit_code() == 0) return;
    if (Elastic() && p.child.killed_by_signal() && p.role != Role::kController) {
      // A lost node of an elastic job: its survivors regroup without it (docs/ELASTIC.md).
      Say(StrCat(p.name, " ", DescribeExit(p), "; elastic job: training goes on without it"));
      return;
    }
    Say(StrCat(p.name, " ", DescribeExit(p),
               failure_code_.has_value() ? "" : "; stopping the job"));
    if (!failure_code_.has_value() && signal_ == 0) failure_code_ = p.child.exit_code();
  }

  // Sends `sig` to every child still running; from now on exits are not failures.
  void SignalAll(int sig) {
    stopping_ = true;
    for (auto& p : procs_) {
      if (!p->done) p->child.SignalGroup(sig);
    }
  }

  void Teardown() {
    if (torn_down_) return;
    torn_down_ = true;
    if (!procs_.empty()) {
      if (!stopping_ && failure_code_.has_value() && signal_ == 0) {
        // The first rank to fail is usually one of several that got the same error from the
        // daemons: the others get a moment to report theirs before they are stopped.
        Pump(absl::Now() + kFailureSettle, [&] {
          return std::all_of(procs_.begin(), procs_.end(),
                             [](const auto& p) { return p->done || p->role != Role::kWorker; });
        });
      }
      if (!stopping_) SignalAll(SIGTERM);
      auto all_done = [&] {
        return std::all_of(procs_.begin(), procs_.end(), [](const auto& p) { return p->done; });
      };
      if (!Pump(absl::Now() + options_.kill_grace, all_done)) {
        for (auto& p : procs_) {
          if (!p->done) Say(StrCat(p->name, " did not stop; killing it"));
        }
      }
      for (auto& p : procs_) p->child.KillGroup();
      // Reap, and copy the last output (bounded: a grandchild outside the group may hold a pipe).
      Pump(absl::Now() + absl::Seconds(2), [&] {
        return all_done() && std::all_of(procs_.begin(), procs_.end(), [](const auto& p) {
                 return p->child.stdout_fd() < 0 && p->child.stderr_fd() < 0;
               });
      });
      procs_.clear();
    }
    // Remote processes are gone with their ssh; closing the lifeline is for any ssh that lingers.
    for (int& fd : lifeline_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    for (int fd : remote_stdin_) close(fd);
    remote_stdin_.clear();
    if (cluster_) {
      absl::Status s = cluster_->Destroy();
      if (!s.ok()) Say(StrCat("removing cluster ", cluster_->name(), ": ", s.ToString()));
      cluster_.reset();
    }
    if (own_run_dir_) {
      std::error_code ec;
      std::filesystem::remove_all(run_dir_, ec);
    }
    if (!tls_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(tls_dir_, ec);
      if (ec) Say(StrCat("removing ", tls_dir_, ": ", ec.message()));
    }
    if (sigfd_ >= 0) close(sigfd_);
    sigfd_ = -1;
    if (mask_set_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    mask_set_ = false;
  }

  RunnerOptions options_;  // a copy: host discovery sets np, nodes and layout
  const LaunchIo io_;
  sigset_t old_mask_;
  bool mask_set_ = false;
  int sigfd_ = -1;
  std::string run_dir_;
  bool own_run_dir_ = false;
  std::string tls_dir_;     // the job's certificates and keys; "" before MakeCredentials
  JobCredentialFiles tls_;
  std::unique_ptr<netemu::Cluster> cluster_;
  std::vector<NodeRanks> layout_;
  std::vector<std::string> node_host_;  // per node: "" = here, else its host (over ssh)
  std::vector<HostProbe> node_probe_;   // per node over ssh: what the probe learned
  int lifeline_[2] = {-1, -1};          // the ssh children's stdin (ssh_launch.h); we hold [1]
  std::vector<int> remote_stdin_;       // the write ends of ssh children's own stdin (files)
  std::vector<std::unique_ptr<Proc>> procs_;
  std::string controller_address_;
  std::string controller_host_;
  int controller_port_ = 0;
  int controller_metrics_port_ = 0;
  int controller_restarts_ = 0;              // restarts so far
  std::optional<absl::Time> restart_at_;     // a restart is due then
  Proc* awaiting_controller_ = nullptr;      // restarted, not yet listening
  std::vector<MetricsTarget> metrics_targets_;
  std::optional<int> failure_code_;
  // Host discovery (launcher.h): the hosts by node index, the script runner, the last update file
  // written, and when the first worker finished (the job's end: discovery stops).
  struct HostNode {
    enum class State { kStarting, kRunning, kRemoved };
    std::string host;
    int slots = 0;
    State state = State::kRunning;
    absl::Time started;
    bool daemon_stopped = false;
  };
  std::vector<HostNode> host_nodes_;
  std::unique_ptr<HostDiscovery> discovery_;
  bool discovering_ = false;
  absl::Time next_discovery_;
  std::string last_discovery_error_;
  std::set<std::string> refused_hosts_;
  int hosts_serial_ = 0;
  bool wrote_hosts_ = false;
  std::vector<std::string> written_nodes_;
  std::optional<absl::Time> finished_at_;
  int signal_ = 0;         // the first SIGINT/SIGTERM/SIGHUP received
  bool stopping_ = false;  // children were signalled: their exits are not failures
  bool torn_down_ = false;
};

}  // namespace

absl::StatusOr<int> RunJob(const RunnerOptions& options, const LaunchIo& io) {
  const std::string me = LocalHostname();
  const bool local_node = options.hosts.empty() ||
                          std::any_of(options.hosts.begin(), options.hosts.end(),
                                      [&](const std::string& h) { return IsThisMachine(h, me); });
  const bool own_controller = options.hosts.empty() || options.controller.empty();
  if (options.node < 0 && ((local_node && options.gravacd_path.empty()) ||
                           (own_controller && options.controller_path.empty()))) {
    return absl::InvalidArgumentError("RunJob: gravacd_path and controller_path must be set");
  }
  if (!options.hosts.empty() && (options.hosts.size() != static_cast<size_t>(options.nodes) ||
                                 options.layout.size() != options.hosts.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RunJob: %d hosts and %d layout entries for %d nodes",
                        options.hosts.size(), options.layout.size(), options.nodes));
  }
  if (options.node >= options.nodes || (options.node >= 0 && options.daemon_socket.empty())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RunJob: node %d needs a daemon socket and must be below nodes (%d)",
                        options.node, options.nodes));
  }
  if (options.np < 1 || options.nodes < 1 || options.nodes > options.np ||
      options.command.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("RunJob: need np >= nodes >= 1 and a command (np %d, nodes %d)", options.np,
                        options.nodes));
  }
  Job job(options, io);
  return job.Run();
}

absl::StatusOr<std::string> FindTool(std::string_view given, std::string_view name,
                                     std::string_view build_subdir, std::string_view self_exe,
                                     const EnvLookup& env) {
  if (!given.empty()) {
    if (IsExecutable(std::string(given))) return std::string(given);
    return absl::NotFoundError(StrCat(name, ": '", given, "' is not an executable file"));
  }
  std::vector<std::string> candidates;
  if (!self_exe.empty()) {
    std::filesystem::path dir = std::filesystem::path(self_exe).parent_path();
    candidates.push_back((dir / name).string());
    candidates.push_back((dir.parent_path() / build_subdir / name).lexically_normal().string());
  }
  for (const std::string& c : candidates) {
    if (IsExecutable(c)) return c;
  }
  if (std::optional<std::string> path = env("PATH")) {
    for (absl::string_view dir : absl::StrSplit(*path, ':', absl::SkipEmpty())) {
      std::string c = StrCat(dir, "/", name);
      if (IsExecutable(c)) return c;
    }
  }
  return absl::NotFoundError(StrCat(name, " not found in ", absl::StrJoin(candidates, ", "),
                                    " or PATH; pass its path with a flag"));
}

}  // namespace gravac::runner

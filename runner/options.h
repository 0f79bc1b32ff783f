// gravacrun's command line: the settings table, the parsed RunnerOptions, link-rate parsing and
// the node-major rank layout.
//
//   gravacrun -np N [--nodes M] [--link RATE[,DELAY]] [--controller_args "..."] -- CMD...
//   gravacrun [-np N] -H host1:4,host2:4 [--ssh_port P] [--ssh_identity_file F] -- CMD...
//
// Flags may be written with dashes or underscores (--theta-min = --theta_min); `-np` is accepted
// as --np. Everything after "--" is the worker command. Settings of the job's policy
// (--compressor, --theta_min, ...) are forwarded to gravac-controller as flags, daemon settings
// (--fusion_threshold_bytes, ...) to every gravacd; the environment is inherited by every child,
// so GRAVAC_* variables reach the controller and the daemons too.
//
// Thread-safety: stateless functions over immutable values.
#ifndef GRAVAC_RUNNER_OPTIONS_H_
#define GRAVAC_RUNNER_OPTIONS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/settings.h"
#include "core/job_id.h"
#include "netemu/shaping.h"
#include "runner/ssh_launch.h"

namespace gravac::runner {

// Node n's ranks: [first_rank, first_rank + local_size).
struct NodeRanks {
  int first_rank = 0;
  int local_size = 0;
};

struct RunnerOptions {
  bool help_requested = false;           // --help: nothing else is filled in
  int np = 0;                            // workers
  int nodes = 1;                         // daemons (emulated nodes)
  std::optional<netemu::LinkSpec> link;  // set: every node in its own shaped namespace
  std::vector<std::string> command;      // the worker command (after "--")
  // The job's identity, given to every gravacd and worker (GRAVAC_JOB_NAME, GRAVAC_RUN_ID). The
  // run id is generated per launch (core/job_id.h GenerateRunId) unless given.
  JobId job;

  // >= 0: start only node `node`'s workers of a job whose controller and gravacd run elsewhere
  // (Kubernetes, by hand), with that gravacd's socket; no controller, daemon or cluster.
  int node = -1;
  std::string daemon_socket;  // with node: the node's gravacd socket (required)
  std::string controller;     // with node: passed to the workers as GRAVAC_CONTROLLER if set

  std::vector<std::string> controller_args;  // extra flags for gravac-controller
  std::vector<std::string> daemon_args;      // extra flags for every gravacd
  // "{node}" in a daemon argument is replaced by the node's index (e.g. --step_log=s.{node}).

  // Multi-host (-H / --hostfile; hosts.h, ssh_launch.h): node n runs on hosts[n] (empty = every
  // node on this machine); a host that is this machine runs without ssh. Ranks fill the hosts in
  // order: layout[n] (empty = RankLayout(np, nodes)). With hosts, `controller`, when set, is used
  // instead of starting one. remote_env is exported for every process started over ssh (-x
  // NAME[=VALUE]); local processes inherit gravacrun's environment.
  std::vector<std::string> hosts;
  std::vector<NodeRanks> layout;
  SshOptions ssh;
  std::vector<std::pair<std::string, std::string>> remote_env;
  // gravacd on a host reached over ssh: these names or paths, tried in order on its PATH.
  std::vector<std::string> remote_gravacd = {"gravacd"};

  std::string gravacd_path;     // "" = found next to gravacrun, in the build tree or in PATH
  std::string controller_path;  // likewise for gravac-controller
  std::string run_dir;          // sockets and the port file; "" = a fresh /tmp/gravacrun-XXXXXX

  // Metrics (launcher.h): each process serves /metrics on a free port of its own address and
  // gravacrun prints where; false (--metrics off) switches serving off in all of them.
  bool metrics = true;
  std::string metrics_sd_file;  // Prometheus file_sd JSON of the job's targets; "" = none

  absl::Duration start_timeout = absl::Seconds(60);  // controller port, daemon sockets
  absl::Duration exit_grace = absl::Seconds(30);     // daemons to exit after the workers did
  absl::Duration kill_grace = absl::Seconds(3);      // SIGTERM/SIGINT -> SIGKILL
  bool verbose = false;                              // log the command lines started
  // How often a controller that dies during the job is restarted on its address (launcher.h).
  int controller_restarts = 5;
  // Elastic jobs (issue 22; docs/ELASTIC.md): min_np > 0 makes the job elastic. The daemons serve
  // successive memberships (--serve_jobs), the workers regroup after a lost node (hvd.elastic),
  // and a node whose processes were killed is lost, not a failure, while at least min_np ranks
  // go on. max_np: most ranks (0 = np). regroup_timeout: the controller's regroup_timeout_s
  // (zero = its default).
  int min_np = 0;
  int max_np = 0;
  absl::Duration regroup_timeout = absl::ZeroDuration();
  // With host discovery: how long a membership change waits for added hosts' workers (Horovod's
  // --elastic-timeout; the controller's new_node_wait_s; zero = its default).
  absl::Duration elastic_timeout = absl::ZeroDuration();
  // Growing and shrinking by host discovery (runner/host_discovery.h; launcher.h): the script's
  // absolute path ("" = none), the slots of a host printed without any, a run's time limit.
  std::string host_discovery_script;
  int slots = 1;
  int reset_limit = 0;  // GRAVAC_RESET_LIMIT for the workers (0 = none)
  absl::Duration host_discovery_timeout = absl::Seconds(10);
};

// The settings table of gravacrun (for --help and parsing).
absl::Span<const SettingSpec> RunnerSettings();

// Parses argv without the program name. With --help, returns at once with help_requested set.
// Fails with InvalidArgument naming the flag for: a
// missing or bad -np, a --metrics other than on/off, --nodes outside 1..np (1..254 with --link), a
// bad --link, an unknown flag, a command word before "--", or no command after it.
absl::StatusOr<RunnerOptions> ParseRunnerArgs(absl::Span<const char* const> args,
                                              const EnvLookup& env);

// The help text.
std::string RunnerHelp();

// Parses a link rate in bit/s: a number ("1e9", "2500000") optionally followed by a unit
// bit, kbit, mbit, gbit or tbit (decimal, as tc reads them; case-insensitive), e.g. "10gbit",
// "500mbit". The rate must be positive and finite.
absl::StatusOr<double> ParseRate(std::string_view text);

// Parses "RATE[,DELAY]", DELAY an absl duration such as "1ms" or "250us" (one-way), and checks
// it with netemu::ValidateLinkSpec.
absl::StatusOr<netemu::LinkSpec> ParseLink(std::string_view text);

// Node-major layout of `np` ranks over `nodes` nodes: node n holds ranks
// [first_rank, first_rank + local_size); the first np % nodes nodes hold one rank more.
std::vector<NodeRanks> RankLayout(int np, int nodes);

// Splits a flag string on whitespace, honouring single and double quotes ("--a 'x y'" -> 2
// words). Fails on an unterminated quote.
absl::StatusOr<std::vector<std::string>> SplitArgs(std::string_view text);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_OPTIONS_H_

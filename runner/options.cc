#include "runner/options.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/absl_compat.h"
#include "core/job_settings.h"
#include "core/status.h"
#include "netemu/naming.h"
#include "runner/hosts.h"

namespace gravac::runner {
namespace {

// Daemon settings forwarded to every gravacd as --name=value when given.
constexpr std::string_view kDaemonFlags[] = {
    "transport",     "ucx_tls",         "ucx_net_devices", "fusion_threshold_bytes",
    "cycle_time_ms", "stall_warning_s", "op_timeout_s",    "step_log",
    "log_level",     "stall_timeout_s", "check_finite",    "timeline_filename"};

// gravacrun's own settings; the job settings and the daemon settings follow (RunnerSettings()).
constexpr SettingSpec kOwnSettings[] = {
    {"np", "", "0", "number of workers (ranks); required", SettingType::kInt},
    {"nodes", "", "1", "number of nodes (one gravacd each); ranks are node-major",
     SettingType::kInt},
    {"link", "", "",
     "RATE[,DELAY]: run every node in its own network namespace, links shaped to RATE "
     "(1gbit, 500mbit, 1e9) with one-way DELAY (1ms); needs root"},
    {"node", "GRAVACRUN_NODE", "-1",
     "start only this node's workers, for a job whose controller and gravacd run elsewhere "
     "(Kubernetes, by hand); -1 = the whole job here",
     SettingType::kInt},
    {"daemon_socket", "GRAVAC_DAEMON_SOCKET", "", "with --node: that node's gravacd socket"},
    {"controller", "GRAVAC_CONTROLLER", "",
     "with --node: the controller's host:port, passed to the workers (GRAVAC_CONTROLLER); with "
     "--hosts: a running controller to use instead of starting one"},
    {"hosts", "", "",
     "host1:4,host2:4: run the job on these hosts, over ssh (Horovod's -H; ranks fill them in "
     "order; localhost and this machine's name run here without ssh)"},
    {"hostfile", "", "",
     "file of hosts, one a line: 'host:4' (Horovod) or 'host slots=4 [max_slots=N]' (Open MPI)"},
    {"ssh_port", "", "0", "ssh port of the hosts (0: ssh's default)", SettingType::kInt},
    {"ssh_identity_file", "", "", "ssh private key for the hosts (ssh -i)"},
    {"ssh_options", "", "",
     "extra ssh words, e.g. \"-o StrictHostKeyChecking=accept-new -l trainer\""},
    {"ssh_connect_timeout_s", "", "10", "limit for ssh to connect to a host",
     SettingType::kDouble},
    {"job_name", "GRAVAC_JOB_NAME", "gravacrun", "the job's name (every gravacd and worker gets it)"},
    {"run_id", "GRAVAC_RUN_ID", "",
     "the job's run id; empty = a fresh one per launch (with --node: the one the node's gravacd "
     "serves, none if empty)"},
    {"controller_args", "", "", "extra flags for gravac-controller, e.g. \"--window 5\""},
    {"daemon_args", "", "", "extra flags for every gravacd ({node} = node index)"},
    {"gravacd_path", "GRAVACRUN_GRAVACD", "", "gravacd binary (default: next to gravacrun)"},
    {"controller_path", "GRAVACRUN_CONTROLLER", "",
     "gravac-controller binary (default: next to gravacrun)"},
    {"run_dir", "", "", "folder for sockets and the port file (default: a fresh /tmp folder)"},
    {"metrics", "", "on",
     "on: the controller and every gravacd serve Prometheus metrics on a free port of their "
     "address (printed at start); off: none serves"},
    {"metrics_sd_file", "", "",
     "write the job's metrics targets there as Prometheus file_sd JSON (labels job, node)"},
    {"start_timeout_s", "", "60", "limit for the controller and daemons to start",
     SettingType::kDouble},
    {"exit_grace_s", "", "30", "time daemons get to exit after the workers succeeded",
     SettingType::kDouble},
    {"kill_grace_s", "", "3", "time between SIGTERM/SIGINT and SIGKILL at teardown",
     SettingType::kDouble},
    {"verbose", "", "false", "print the command lines started", SettingType::kBool},
    {"controller_restarts", "", "5",
     "how often a controller that dies during the job is restarted on the same address (the "
     "daemons re-join it; training goes on meanwhile); 0 = a dead controller ends the job",
     SettingType::kInt},
    {"min_np", "", "0",
     "elastic job (hvd.elastic): fewest ranks the job trains on; a node whose processes die is "
     "dropped and the survivors go on from their last commit while at least this many ranks are "
     "left, else the job ends naming the lost nodes (0 = not elastic)",
     SettingType::kInt},
    {"max_np", "", "0", "elastic job: most ranks (0 = -np)", SettingType::kInt},
    {"regroup_timeout_s", "", "0",
     "elastic job: a node that did not ask for the next membership this long after the first "
     "did is lost (the controller's regroup_timeout_s; 0 = its default, 10 s)",
     SettingType::kDouble},
    {"elastic_timeout_s", "", "0",
     "elastic job with --host-discovery-script: how long a membership change waits for the "
     "workers of hosts being added before it goes on without them (Horovod's --elastic-timeout; "
     "the controller's new_node_wait_s; 0 = its default, 60 s)",
     SettingType::kDouble},
    {"host_discovery_script", "", "",
     "elastic job: a program printing the hosts to run on, one a line, 'host' or 'host:slots' "
     "(Horovod's); run about once a second: hosts that appear get a node (gravacd and workers, "
     "an emulated node with --link) and the job grows onto them at its next commit; hosts that "
     "disappear leave at the next commit. The job starts on the first hosts printed that hold "
     "-np ranks; --min-np defaults to -np"},
    {"slots", "", "1", "with --host-discovery-script: ranks on a host printed without ':slots'",
     SettingType::kInt},
    {"reset_limit", "", "0",
     "elastic job: a worker resets (after a failure or a host update) at most this often; the "
     "next time the job ends (Horovod's --reset-limit; 0 = no limit)",
     SettingType::kInt},
    {"host_discovery_timeout_s", "", "10",
     "a --host-discovery-script run that takes longer is killed (the last good hosts stay)",
     SettingType::kDouble},
};

// Forwarded to every gravacd.
constexpr SettingSpec kDaemonSettings[] = {
    {"transport", "", "", "gravacd: data-plane transport (ucx)"},
    {"ucx_tls", "", "", "gravacd: UCX_TLS (default with --link: tcp)"},
    {"ucx_net_devices", "", "", "gravacd: UCX_NET_DEVICES (default with --link: eth0; with every node on this machine: lo)"},
    {"fusion_threshold_bytes", "", "", "gravacd: tensor fusion threshold"},
    {"cycle_time_ms", "", "", "gravacd: negotiation cycle time"},
    {"stall_warning_s", "", "", "gravacd: stall warning after"},
    {"op_timeout_s", "", "", "gravacd: data-plane operation timeout"},
    {"stall_timeout_s", "", "", "gravacd: a stalled tensor fails the job after (600)"},
    {"check_finite", "", "", "gravacd: refuse non-finite float allreduces (true|false)"},
    {"step_log", "", "", "gravacd: per-node step log path ({node} = node index)"},
    {"timeline_filename", "", "",
     "gravacd: Horovod's timeline (Chrome trace) of the job, written by node 0's daemon"},
    {"log_level", "", "", "gravacd and controller: debug|info|warning|error"},
};

constexpr char kUsage[] =
    "usage: gravacrun -np N [--nodes M] [--link RATE[,DELAY]] [--controller_args \"...\"] "
    "[flags] -- CMD [ARGS...]\n"
    "Starts gravac-controller, M gravacd and N workers (CMD) on this machine and waits for them.\n"
    "       gravacrun -np N --nodes M --node I --daemon_socket PATH [--controller HOST:PORT] "
    "-- CMD [ARGS...]\n"
    "Starts only node I's workers of a job whose controller and gravacd run elsewhere.\n"
    "       gravacrun [-np N] -H host1:4,host2:4 [--ssh_port P] [-x NAME[=VALUE]] "
    "-- CMD [ARGS...]\n"
    "Starts the controller here and gravacd and the workers on each host, over ssh.\n";

// -np -> --np; --theta-min -> --theta_min (the name only, never a value).
std::string NormalizeFlag(std::string_view arg) {
  if (arg == "-np" || arg.substr(0, 4) == "-np=") return StrCat("-", arg);
  if (arg.size() <= 2 || arg.substr(0, 2) != "--") return std::string(arg);
  std::string out(arg);
  size_t end = out.find('=');
  if (end == std::string::npos) end = out.size();
  for (size_t i = 2; i < end; ++i) {
    if (out[i] == '-') out[i] = '_';
  }
  return out;
}

absl::StatusOr<absl::Duration> Seconds(const Settings& s, std::string_view name) {
  ASSIGN_OR_RETURN(double v, s.GetDouble(name));
  if (!(v >= 0) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrFormat("--%s must be >= 0, got %g", name, v));
  }
  return absl::Seconds(v);
}

// The whole table: kOwnSettings, one row per job setting (core/job_settings.h), forwarded to
// gravac-controller as --name=value when given, then kDaemonSettings. Those rows have no environment variable and no
// default of their own (the controller reads GRAVAC_* itself and applies the defaults); their help
// names the controller's default.
struct RunnerTable {
  RunnerTable() {
    for (const SettingSpec& job : JobSettings()) {
      helps.push_back(job.default_value.empty()
                          ? StrCat("controller: ", job.help)
                          : StrCat("controller: ", job.help, " (default ", job.default_value, ")"));
    }
    specs.assign(std::begin(kOwnSettings), std::end(kOwnSettings));
    size_t i = 0;
    for (const SettingSpec& job : JobSettings()) {
      specs.push_back({job.name, "", "", helps[i++], SettingType::kString});
    }
    specs.insert(specs.end(), std::begin(kDaemonSettings), std::end(kDaemonSettings));
  }
  std::vector<std::string> helps;  // filled before specs point into it
  std::vector<SettingSpec> specs;
};

const RunnerTable& Table() {
  static const RunnerTable* const table = new RunnerTable();
  return *table;
}

// --hosts / --hostfile and the ssh settings. With hosts, -np defaults to their slots and --nodes
// becomes the number of hosts that get ranks.
absl::Status ParseHostSettings(const Settings& s, int64_t* np, int64_t* nodes,
                               RunnerOptions* options) {
  ASSIGN_OR_RETURN(std::string list, s.GetString("hosts"));
  ASSIGN_OR_RETURN(std::string file, s.GetString("hostfile"));
  if (list.empty() && file.empty()) return absl::OkStatus();
  if (!list.empty() && !file.empty()) {
    return absl::InvalidArgumentError("-H/--hosts and --hostfile both list hosts; give one");
  }
  if (*nodes != 1) {
    return absl::InvalidArgumentError(
        "--hosts/--hostfile and --nodes both say how many nodes there are; give one of them");
  }
  std::vector<HostSlots> hosts;
  if (!list.empty()) {
    ASSIGN_OR_RETURN(hosts, ParseHostList(list));
  } else {
    ASSIGN_OR_RETURN(hosts, ReadHostfile(file));
  }
  for (const HostSlots& h : hosts) {
    if (h.host.starts_with("-")) {
      return absl::InvalidArgumentError(
          absl::StrFormat("host '%s' starts with '-': not a host name", h.host));
    }
  }
  if (*np < 0 || *np > 4096) return absl::OkStatus();  // the -np check below names it
  ASSIGN_OR_RETURN(std::vector<int> ranks, FillHosts(&hosts, static_cast<int>(*np)));
  int first = 0;
  for (size_t n = 0; n < hosts.size(); ++n) {
    options->hosts.push_back(hosts[n].host);
    options->layout.push_back({first, ranks[n]});
    first += ranks[n];
  }
  *np = first;
  *nodes = static_cast<int64_t>(hosts.size());

  ASSIGN_OR_RETURN(int64_t port, s.GetInt("ssh_port"));
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat("--ssh_port must be 0..65535, got %d", port));
  }
  options->ssh.port = static_cast<int>(port);
  ASSIGN_OR_RETURN(options->ssh.identity_file, s.GetString("ssh_identity_file"));
  ASSIGN_OR_RETURN(std::string ssh_options, s.GetString("ssh_options"));
  ASSIGN_OR_RETURN(options->ssh.options, SplitArgs(ssh_options));
  ASSIGN_OR_RETURN(options->ssh.connect_timeout, Seconds(s, "ssh_connect_timeout_s"));
  return absl::OkStatus();
}

// A job whose nodes all run on this machine (no --hosts, --link, --node or discovery script)
// never sends data off it, so its gravacds get --ucx_net_devices=lo unless a device list is given
// (flag, --daemon_args, UCX_NET_DEVICES or GRAVAC_UCX_NET_DEVICES). Shared memory is not a
// network device and stays allowed. Without the pin UCX takes every interface up when a gravacd
// makes its worker, and interfaces that come and go on the host (containers, VPNs, another job's
// veth pair) break a job that never used them: ucp_worker_create fails with "No such device"
// when one vanishes as the worker is made, and a CI run's first allreduce stalled until the op
// timeout while another test's veth pair came and went.
void PinLocalDataPlaneToLoopback(const EnvLookup& env, bool devices_given,
                                 RunnerOptions* options) {
  if (!options->hosts.empty() || options->link.has_value() || options->node >= 0 ||
      !options->host_discovery_script.empty() || devices_given) {
    return;
  }
  for (const std::string& arg : options->daemon_args) {
    if (arg.starts_with("--ucx_net_devices")) return;
  }
  for (std::string_view var : {"UCX_NET_DEVICES", "GRAVAC_UCX_NET_DEVICES"}) {
    if (std::optional<std::string> v = env(var); v.has_value() && !v->empty()) return;
  }
  options->daemon_args.push_back("--ucx_net_devices=lo");
}

}  // namespace

absl::Span<const SettingSpec> RunnerSettings() { return Table().specs; }

std::string RunnerHelp() {
  return StrCat(kUsage, "\n", Settings::Help(RunnerSettings(), "gravacrun"));
}

absl::StatusOr<double> ParseRate(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(AsAbsl(text));
  struct Unit {
    std::string_view suffix;
    double scale;
  };
  constexpr Unit kUnits[] = {
      {"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1.0}};
  std::string_view number = lower;
  double scale = 1.0;
  for (const Unit& u : kUnits) {
    if (number.size() > u.suffix.size() && number.ends_with(u.suffix)) {
      number.remove_suffix(u.suffix.size());
      scale = u.scale;
      break;
    }
  }
  double value = 0;
  if (number.empty() || number.find_first_of(" \t\n") != std::string_view::npos ||
      !absl::SimpleAtod(AsAbsl(number), &value) || !std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("link rate '%s' is not a positive rate (e.g. 1gbit, 500mbit, 1e9)", text));
  }
  return value * scale;
}

absl::StatusOr<netemu::LinkSpec> ParseLink(std::string_view text) {
  netemu::LinkSpec link;
  std::string_view rate = text;
  size_t comma = text.find(',');
  if (comma != std::string_view::npos) {
    rate = text.substr(0, comma);
    std::string_view delay = text.substr(comma + 1);
    if (!absl::ParseDuration(AsAbsl(delay), &link.delay)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--link: delay '%s' is not a duration (e.g. 1ms, 250us)", delay));
    }
  }
  absl::StatusOr<double> bits = ParseRate(rate);
  if (!bits.ok()) return absl::InvalidArgumentError(StrCat("--link: ", bits.status().message()));
  link.rate_bits_per_s = *bits;
  absl::Status valid = netemu::ValidateLinkSpec(link);
  if (!valid.ok()) return absl::InvalidArgumentError(StrCat("--link: ", valid.message()));
  return link;
}

std::vector<NodeRanks> RankLayout(int np, int nodes) {
  std::vector<NodeRanks> layout;
  if (np <= 0 || nodes <= 0) return layout;
  int first = 0;
  for (int n = 0; n < nodes; ++n) {
    int count = np / nodes + (n < np % nodes ? 1 : 0);
    layout.push_back({first, count});
    first += count;
  }
  return layout;
}

absl::StatusOr<std::vector<std::string>> SplitArgs(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word.push_back(c);
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (quote != 0) {
    return absl::InvalidArgumentError(StrCat("unterminated quote in \"", text, "\""));
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

absl::StatusOr<RunnerOptions> ParseRunnerArgs(absl::Span<const char* const> args,
                                              const EnvLookup& env) {
  std::vector<std::string> flags;
  RunnerOptions options;
  bool saw_separator = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::string_view(args[i]) == "--") {
      options.command.assign(args.begin() + i + 1, args.end());
      saw_separator = true;
      break;
    }
    flags.push_back(NormalizeFlag(args[i]));
    // The value of a non-boolean flag written as "--name value" is taken verbatim.
    const std::string& flag = flags.back();
    if (flag.size() > 2 && flag.starts_with("--") && flag.find('=') == std::string::npos &&
        i + 1 < args.size()) {
      for (const SettingSpec& spec : RunnerSettings()) {
        if (spec.name == std::string_view(flag).substr(2) && spec.type != SettingType::kBool) {
          flags.emplace_back(args[++i]);
          break;
        }
      }
    }
  }
  std::vector<const char*> flag_ptrs;
  for (const std::string& f : flags) flag_ptrs.push_back(f.c_str());
  ASSIGN_OR_RETURN(Settings s, Settings::Parse(RunnerSettings(), flag_ptrs, env));
  if (s.help_requested()) {
    options.help_requested = true;
    return options;
  }
  if (!s.positional().empty()) {
    return absl::InvalidArgumentError(StrCat("unexpected '", s.positional()[0],
                                             "' before \"--\"; write the worker command "
                                             "after \"--\"\n",
                                             kUsage));
  }
  if (!saw_separator || options.command.empty()) {
    return absl::InvalidArgumentError(StrCat("no worker command after \"--\"\n", kUsage));
  }

  ASSIGN_OR_RETURN(int64_t np, s.GetInt("np"));
  ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
  RETURN_IF_ERROR(ParseHostSettings(s, &np, &nodes, &options));
  if (np < 1 || np > 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-np must be 1..4096 (number of workers), got %d", np));
  }
  ASSIGN_OR_RETURN(std::string link, s.GetString("link"));
  const int64_t max_nodes = link.empty() ? np : std::min<int64_t>(np, netemu::kMaxNodes);
  if (nodes < 1 || nodes > max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--nodes must be 1..%d (at most one node per worker%s), got %d", max_nodes,
                        link.empty() ? "" : " and 254 emulated nodes", nodes));
  }
  options.np = static_cast<int>(np);
  options.nodes = static_cast<int>(nodes);
  if (!link.empty()) {
    ASSIGN_OR_RETURN(options.link, ParseLink(link));
  }

  ASSIGN_OR_RETURN(std::string controller_args, s.GetString("controller_args"));
  ASSIGN_OR_RETURN(options.controller_args, SplitArgs(controller_args));
  ASSIGN_OR_RETURN(std::string daemon_args, s.GetString("daemon_args"));
  ASSIGN_OR_RETURN(options.daemon_args, SplitArgs(daemon_args));
  for (const SettingSpec& job : JobSettings()) {
    ASSIGN_OR_RETURN(std::string v, s.GetString(job.name));
    if (!v.empty()) options.controller_args.push_back(StrCat("--", job.name, "=", v));
  }
  bool tls_given = false;
  bool devices_given = false;
  for (std::string_view name : kDaemonFlags) {
    ASSIGN_OR_RETURN(std::string v, s.GetString(name));
    if (v.empty()) continue;
    options.daemon_args.push_back(StrCat("--", name, "=", v));
    if (name == "log_level") options.controller_args.push_back(StrCat("--", name, "=", v));
    tls_given |= name == "ucx_tls";
    devices_given |= name == "ucx_net_devices";
  }
  if (options.link.has_value()) {
    // The data plane must cross the shaped link: TCP over the namespace's interface.
    if (!tls_given) options.daemon_args.push_back("--ucx_tls=tcp");
    if (!devices_given) options.daemon_args.push_back("--ucx_net_devices=eth0");
  }

  ASSIGN_OR_RETURN(int64_t node, s.GetInt("node"));
  if (!options.hosts.empty()) {
    if (node >= 0 || options.link.has_value()) {
      return absl::InvalidArgumentError(
          "--hosts/--hostfile place every node on a real host: --node and --link do not apply");
    }
    ASSIGN_OR_RETURN(options.controller, s.GetString("controller"));
    if (!options.controller.empty() && !options.controller_args.empty()) {
      return absl::InvalidArgumentError(StrCat(
          "--controller ", options.controller,
          " is a running controller: the job's policy flags belong to it, not to gravacrun"));
    }
  }
  if (node >= 0) {
    if (node >= nodes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--node must be -1 or 0..%d (below --nodes), got %d", nodes - 1, node));
    }
    if (options.link.has_value() || !options.controller_args.empty() ||
        !options.daemon_args.empty()) {
      return absl::InvalidArgumentError(
          "--node starts no controller, daemon or emulated cluster: --link and controller or "
          "daemon flags belong to the processes that run them");
    }
    options.node = static_cast<int>(node);
    ASSIGN_OR_RETURN(options.daemon_socket, s.GetString("daemon_socket"));
    if (options.daemon_socket.empty()) {
      return absl::InvalidArgumentError(
          "--node needs --daemon_socket (or GRAVAC_DAEMON_SOCKET): the socket of the node's "
          "gravacd");
    }
    ASSIGN_OR_RETURN(options.controller, s.GetString("controller"));
  } else if (node != -1) {
    return absl::InvalidArgumentError(absl::StrFormat("--node must be -1 or >= 0, got %d", node));
  }

  ASSIGN_OR_RETURN(options.job.name, s.GetString("job_name"));
  ASSIGN_OR_RETURN(options.job.run_id, s.GetString("run_id"));
  if (options.job.run_id.empty() && options.node < 0) options.job.run_id = GenerateRunId();
  if (absl::Status bad = CheckJobId(options.job); !bad.ok() || options.job.name.empty()) {
    return absl::InvalidArgumentError(
        StrCat("--job_name/--run_id: ", bad.ok() ? "the name is empty" : bad.message()));
  }
  ASSIGN_OR_RETURN(options.gravacd_path, s.GetString("gravacd_path"));
  ASSIGN_OR_RETURN(options.controller_path, s.GetString("controller_path"));
  ASSIGN_OR_RETURN(options.run_dir, s.GetString("run_dir"));
  ASSIGN_OR_RETURN(std::string metrics, s.GetString("metrics"));
  if (metrics != "on" && metrics != "off") {
    return absl::InvalidArgumentError(StrCat("--metrics must be on or off, got '", metrics, "'"));
  }
  options.metrics = metrics == "on";
  ASSIGN_OR_RETURN(options.metrics_sd_file, s.GetString("metrics_sd_file"));
  ASSIGN_OR_RETURN(options.start_timeout, Seconds(s, "start_timeout_s"));
  ASSIGN_OR_RETURN(options.exit_grace, Seconds(s, "exit_grace_s"));
  ASSIGN_OR_RETURN(options.kill_grace, Seconds(s, "kill_grace_s"));
  ASSIGN_OR_RETURN(options.verbose, s.GetBool("verbose"));
  ASSIGN_OR_RETURN(int64_t restarts, s.GetInt("controller_restarts"));
  if (restarts < 0 || restarts > 1000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--controller_restarts must be 0..1000, got %d", restarts));
  }
  options.controller_restarts = static_cast<int>(restarts);
  ASSIGN_OR_RETURN(int64_t min_np, s.GetInt("min_np"));
  ASSIGN_OR_RETURN(int64_t max_np, s.GetInt("max_np"));
  if (min_np < 0 || min_np > options.np) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--min-np must be 1..-np (%d), got %d", options.np, min_np));
  }
  if (max_np != 0 && (max_np < options.np || max_np > 1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max-np must be >= -np (%d), got %d", options.np, max_np));
  }
  if (max_np != 0 && min_np == 0) {
    return absl::InvalidArgumentError("--max-np needs --min-np (an elastic job)");
  }
  if (min_np > 0 && options.node >= 0) {
    return absl::InvalidArgumentError(
        "--min-np: an elastic job needs the whole job under this gravacrun (not --node)");
  }
  ASSIGN_OR_RETURN(options.host_discovery_script, s.GetString("host_discovery_script"));
  ASSIGN_OR_RETURN(int64_t slots, s.GetInt("slots"));
  if (slots < 1 || slots > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat("--slots must be 1..65536, got %d", slots));
  }
  options.slots = static_cast<int>(slots);
  ASSIGN_OR_RETURN(options.host_discovery_timeout, Seconds(s, "host_discovery_timeout_s"));
  if (!options.host_discovery_script.empty()) {
    if (!options.hosts.empty() || options.node >= 0 || nodes != 1) {
      return absl::InvalidArgumentError(
          "--host-discovery-script gives the job's hosts: --hosts/--hostfile, --nodes and --node "
          "do not apply (each host printed is one node; --link emulates them here)");
    }
    const std::string& script = options.host_discovery_script;
    if (access(script.c_str(), X_OK) != 0 || std::filesystem::is_directory(script)) {
      return absl::InvalidArgumentError(StrCat(
          "--host-discovery-script ", script, ": not an executable file (",
          access(script.c_str(), F_OK) != 0 ? "not found" : "chmod +x it", ")"));
    }
    options.host_discovery_script = std::filesystem::absolute(script).string();
    if (options.host_discovery_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--host_discovery_timeout_s must be > 0");
    }
    if (min_np == 0) min_np = options.np;  // Horovod's default
  }
  ASSIGN_OR_RETURN(int64_t reset_limit, s.GetInt("reset_limit"));
  if (reset_limit < 0 || reset_limit > 1 << 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--reset-limit must be >= 0 (0 = no limit), got %d", reset_limit));
  }
  if (reset_limit > 0 && min_np == 0) {
    return absl::InvalidArgumentError("--reset-limit needs --min-np (an elastic job)");
  }
  options.reset_limit = static_cast<int>(reset_limit);
  options.min_np = static_cast<int>(min_np);
  options.max_np = static_cast<int>(max_np);
  ASSIGN_OR_RETURN(options.regroup_timeout, Seconds(s, "regroup_timeout_s"));
  ASSIGN_OR_RETURN(options.elastic_timeout, Seconds(s, "elastic_timeout_s"));
  if (options.elastic_timeout > absl::ZeroDuration() && options.host_discovery_script.empty()) {
    return absl::InvalidArgumentError(
        "--elastic-timeout needs --host-discovery-script (it bounds the wait for added hosts)");
  }
  PinLocalDataPlaneToLoopback(env, devices_given, &options);
  return options;
}

}  // namespace gravac::runner

#include "netemu/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "netemu/iperf.h"

namespace gravac::netemu {
namespace {

// The hub's end of the host link (the host's end is ClusterName::HostLinkDevice()); the guardian
// script below names it too.
constexpr char kHostLinkPeer[] = "host";

// Reads one EOF from stdin (the owner died or closed the pipe), then kills what runs in the
// cluster's namespaces and deletes them (the hub's end of a host link first, which removes both
// ends at once). Deleting a namespace that is already gone is a no-op.
constexpr char kGuardianScript[] =
    "read -r _ignored\n"
    "for ns in \"$@\"; do\n"
    "  for p in $(ip netns pids \"$ns\" 2>/dev/null); do kill -KILL \"$p\" 2>/dev/null; done\n"
    "  ip -n \"$ns\" link del host 2>/dev/null\n"
    "  ip netns del \"$ns\" 2>/dev/null\n"
    "done\n"
    "exit 0\n";

absl::Status RunAll(const std::vector<std::vector<std::string>>& commands) {
  for (const auto& argv : commands) RETURN_IF_ERROR(RunChecked(argv).status());
  return absl::OkStatus();
}

// Shapes with tc; a kernel without sch_netem cannot add delay, which is a precondition failure
// (the caller asked for something this machine cannot do), not an internal error.
absl::Status Shape(const std::string& netns, const std::string& dev, const LinkSpec& link) {
  absl::Status status = RunAll(ShapingCommands(netns, dev, link));
  if (!status.ok() && absl::StrContains(status.message(), "netem") &&
      absl::StrContains(status.message(), "qdisc kind is unknown")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this kernel has no netem qdisc (sch_netem), so links cannot be given a delay: ",
        status.message()));
  }
  return status;
}

absl::Status KillNamespacePids(const std::string& netns) {
  ASSIGN_OR_RETURN(std::string out, RunChecked({"ip", "netns", "pids", netns}));
  for (absl::string_view word : absl::StrSplit(out, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(word, &pid) || pid <= 1 || pid == getpid()) continue;
    if (kill(pid, SIGKILL) == -1 && errno != ESRCH) {
      return ErrnoCallStatus(errno, absl::StrCat("kill(", pid, ", SIGKILL) in netns ", netns),
                             __FILE__, __LINE__);
    }
  }
  return absl::OkStatus();
}

bool ProcessRuns(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// True when this namespace has a network device named `device`.
bool HostDeviceExists(const std::string& device) {
  return access(absl::StrCat("/sys/class/net/", device).c_str(), F_OK) == 0;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListNamespaces() {
  ASSIGN_OR_RETURN(std::string out, RunChecked({"ip", "netns", "list"}));
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    // Lines read "name" or "name (id: 3)".
    names.emplace_back(line.substr(0, line.find(' ')));
  }
  return names;
}

absl::StatusOr<std::vector<std::pair<ClusterName, int>>> ListClusters(std::string_view prefix) {
  ASSIGN_OR_RETURN(std::vector<std::string> all, ListNamespaces());
  std::map<std::string, std::pair<ClusterName, int>> clusters;
  for (const std::string& netns : all) {
    std::optional<NamespaceRef> ref = ParseNamespaceName(netns);
    if (!ref.has_value() || (!prefix.empty() && ref->cluster.prefix != prefix)) continue;
    auto [it, inserted] = clusters.try_emplace(ref->cluster.ToString(), ref->cluster, 0);
    if (ref->node >= 0) ++it->second.second;
  }
  std::vector<std::pair<ClusterName, int>> result;
  for (auto& [unused, entry] : clusters) result.push_back(std::move(entry));
  return result;
}

namespace {

// Whether `netns` is still listed; true when the list cannot be read (so an error stands).
bool NamespaceExists(const std::string& netns) {
  absl::StatusOr<std::vector<std::string>> all = ListNamespaces();
  return !all.ok() || std::find(all->begin(), all->end(), netns) != all->end();
}

}  // namespace

absl::Status DestroyClusterNamespaces(const ClusterName& name) {
  ASSIGN_OR_RETURN(std::vector<std::string> all, ListNamespaces());
  std::vector<std::string> mine;
  for (const std::string& netns : all) {
    std::optional<NamespaceRef> ref = ParseNamespaceName(netns);
    if (ref.has_value() && ref->cluster.ToString() == name.ToString()) mine.push_back(netns);
  }
  // Nodes before the hub, so no veth end is left dangling in between.
  std::stable_partition(mine.begin(), mine.end(),
                        [](const std::string& ns) { return !ns.ends_with("-hub"); });
  absl::Status first;
  for (const std::string& netns : mine) {
    absl::Status killed = KillNamespacePids(netns);
    if (netns.ends_with("-hub")) {
      // Deleting the hub's end removes the host's end at once (not when the namespace is reaped).
      (void)RunCommand({"ip", "-n", netns, "link", "del", kHostLinkPeer});
    }
    absl::Status deleted = RunChecked({"ip", "netns", "del", netns}).status();
    absl::Status failed = !killed.ok() ? killed : deleted;
    // Another cleaner (the owner's guardian, a concurrent CleanupStale) may have removed the
    // namespace since it was listed: gone is what this wanted.
    if (!failed.ok() && !NamespaceExists(netns)) failed = absl::OkStatus();
    if (first.ok()) first = failed;
  }
  return first;
}

absl::StatusOr<std::vector<std::string>> CleanupStale(std::string_view prefix) {
  ASSIGN_OR_RETURN(auto clusters, ListClusters(prefix));
  std::vector<std::string> removed;
  for (const auto& [name, unused_nodes] : clusters) {
    if (ProcessRuns(name.pid)) continue;
    RETURN_IF_ERROR(DestroyClusterNamespaces(name));
    removed.push_back(name.ToString());
  }
  return removed;
}

Cluster::Cluster(ClusterName name, int nodes, LinkSpec link, bool host_link)
    : name_(std::move(name)),
      name_str_(name_.ToString()),
      nodes_(nodes),
      link_(link),
      host_link_(host_link) {}

Cluster::~Cluster() {
  if (owned_) (void)Destroy();
  StopGuardian();
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(int nodes, const LinkSpec& link,
                                                         std::string name_prefix) {
  return Create(nodes, link, ClusterOptions{.name_prefix = std::move(name_prefix)});
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(int nodes, const LinkSpec& link,
                                                         const ClusterOptions& options) {
  if (nodes < 1 || nodes > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster size ", nodes, " is outside [1, ", kMaxNodes, "]"));
  }
  if (options.host_link && nodes >= kHostLinkByte) {
    return absl::InvalidArgumentError(absl::StrCat("a cluster with a host link has at most ",
                                                   kHostLinkByte - 1, " nodes, not ", nodes));
  }
  RETURN_IF_ERROR(ValidateLinkSpec(link));
  RETURN_IF_ERROR(ValidatePrefix(options.name_prefix));
  ASSIGN_OR_RETURN(auto existing, ListClusters(""));
  std::set<int> used;
  for (const auto& [name, unused] : existing) used.insert(name.subnet);

  // Claim a name by creating its hub namespace: `ip netns add` fails if the name exists.
  absl::BitGen gen;
  const int start = absl::Uniform(gen, 0, kNumSubnets);
  absl::Status last = absl::ResourceExhaustedError("all 512 subnets of 198.18.0.0/15 are in use");
  for (int k = 0; k < kNumSubnets; ++k) {
    const int subnet = (start + k) % kNumSubnets;
    if (used.contains(subnet)) continue;
    ClusterName name{options.name_prefix, getpid(), subnet};
    // A host link of a cluster being removed may linger for a moment: leave its subnet alone.
    if (options.host_link && HostDeviceExists(name.HostLinkDevice())) continue;
    absl::Status claimed = RunChecked({"ip", "netns", "add", name.HubNamespace()}).status();
    if (!claimed.ok()) {
      last = claimed;
      if (absl::StrContains(claimed.message(), "File exists")) continue;
      return claimed;
    }
    std::unique_ptr<Cluster> cluster(new Cluster(std::move(name), nodes, link, options.host_link));
    if (options.guardian) RETURN_IF_ERROR(cluster->StartGuardian());
    RETURN_IF_ERROR(cluster->Build());  // on failure ~Cluster removes what was made
    return cluster;
  }
  return last;
}

absl::Status Cluster::Build() {
  const std::string hub = hub_namespace();
  RETURN_IF_ERROR(RunAll({{"ip", "-n", hub, "link", "add", "br0", "type", "bridge"},
                          {"ip", "-n", hub, "link", "set", "br0", "up"},
                          {"ip", "-n", hub, "link", "set", "lo", "up"}}));
  for (int i = 0; i < nodes_; ++i) {
    const std::string ns = node_namespace(i);
    const std::string veth = absl::StrCat("v", i);
    RETURN_IF_ERROR(RunChecked({"ip", "netns", "add", ns}).status());
    RETURN_IF_ERROR(RunAll({
        {"ip", "-n", hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
        {"ip", "-n", hub, "link", "set", veth, "master", "br0", "up"},
        {"ip", "-n", ns, "link", "set", "lo", "up"},
        {"ip", "-n", ns, "addr", "add", absl::StrCat(node_address(i), "/24"), "dev", "eth0"},
        {"ip", "-n", ns, "link", "set", "eth0", "up"},
    }));
    RETURN_IF_ERROR(Shape(ns, "eth0", link_));
    RETURN_IF_ERROR(Shape(hub, veth, link_));
  }
  if (host_link_) {
    // Unshaped: the host's management traffic is not the emulated network's.
    const std::string dev = name_.HostLinkDevice();
    RETURN_IF_ERROR(RunAll({
        {"ip", "link", "add", dev, "type", "veth", "peer", "name", kHostLinkPeer, "netns", hub},
        {"ip", "-n", hub, "link", "set", kHostLinkPeer, "master", "br0", "up"},
        {"ip", "addr", "add", absl::StrCat(name_.HostLinkAddress(), "/24"), "dev", dev},
        {"ip", "link", "set", dev, "up"},
    }));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Attach(std::string_view name) {
  std::optional<ClusterName> parsed = ParseClusterName(name);
  if (!parsed.has_value()) {
    return absl::InvalidArgumentError(
        gravac::StrCat("'", name, "' is not a cluster name (<prefix>-<pid>-s<subnet>)"));
  }
  ASSIGN_OR_RETURN(auto clusters, ListClusters(parsed->prefix));
  for (const auto& [cluster, nodes] : clusters) {
    if (cluster.ToString() != name) continue;
    const bool host_link =
        RunCommand({"ip", "-n", cluster.HubNamespace(), "link", "show", kHostLinkPeer})
            .value_or(CommandResult{})
            .status.success();
    std::unique_ptr<Cluster> attached(
        new Cluster(cluster, nodes, LinkSpec{0, absl::ZeroDuration()}, host_link));
    attached->owned_ = false;
    return attached;
  }
  return absl::NotFoundError(gravac::StrCat("no cluster named '", name, "' on this machine"));
}

std::vector<std::string> Cluster::namespaces() const {
  std::vector<std::string> all;
  for (int i = 0; i < nodes_; ++i) all.push_back(node_namespace(i));
  all.push_back(hub_namespace());
  return all;
}

absl::Status Cluster::StartGuardian() {
  int fds[2];
  GRAVAC_RETURN_IF_ERRNO(pipe2(fds, O_CLOEXEC));
  std::vector<std::string> argv = {"/bin/sh", "-c", kGuardianScript, "gravac-netemu-guardian"};
  for (const std::string& ns : namespaces()) argv.push_back(ns);
  absl::StatusOr<Process> guardian = Process::Spawn(argv, {.netns = "",
                                                           .env = {},
                                                           .output = OutputMode::kNull,
                                                           .stdin_fd = fds[0],
                                                           .new_session = true});
  close(fds[0]);
  if (!guardian.ok()) {
    close(fds[1]);
    return guardian.status();
  }
  guardian_ = std::move(guardian).value();
  guardian_fd_ = fds[1];
  return absl::OkStatus();
}

void Cluster::StopGuardian() {
  if (guardian_fd_ >= 0) close(guardian_fd_);
  guardian_fd_ = -1;
  // EOF makes the guardian re-run the deletion, a no-op once Destroy() succeeded.
  if (guardian_.running() && !guardian_.Wait(absl::Seconds(10)).ok()) (void)guardian_.Kill();
}

absl::Status Cluster::Destroy() {
  absl::Status status = DestroyClusterNamespaces(name_);
  StopGuardian();
  return status;
}

void Cluster::Release() {
  owned_ = false;
  (void)guardian_.Kill();  // killed, not told: it must not delete anything
  if (guardian_fd_ >= 0) close(guardian_fd_);
  guardian_fd_ = -1;
}

absl::StatusOr<Process> Cluster::Spawn(int node, const std::vector<std::string>& argv,
                                       SpawnOptions options) const {
  if (node < 0 || node >= nodes_) {
    return absl::OutOfRangeError(
        absl::StrCat("node ", node, " is outside cluster ", name_str_, " of ", nodes_, " nodes"));
  }
  options.netns = node_namespace(node);
  return Process::Spawn(argv, options);
}

absl::StatusOr<CommandResult> Cluster::Run(int node, const std::vector<std::string>& argv,
                                           absl::Duration timeout) const {
  if (node < 0 || node >= nodes_) {
    return absl::OutOfRangeError(
        absl::StrCat("node ", node, " is outside cluster ", name_str_, " of ", nodes_, " nodes"));
  }
  return RunCommand(argv, {.netns = node_namespace(node), .env = {}, .timeout = timeout});
}

absl::StatusOr<double> Cluster::MeasureRateIperf3(int from, int to, absl::Duration duration) const {
  if (from == to) return absl::InvalidArgumentError("iperf3 needs two different nodes");
  const std::string port = absl::StrCat(5201 + from);  // one server per (from, to) pair
  const std::string seconds =
      absl::StrCat(std::max<int64_t>(1, std::llround(absl::ToDoubleSeconds(duration))));
  ASSIGN_OR_RETURN(Process server,
                   Spawn(to, {"iperf3", "-s", "-1", "-B", node_address(to), "-p", port},
                         {.netns = "", .env = {}, .output = OutputMode::kNull}));
  // The server may not listen yet: retry the client while the connection is refused.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (true) {
    ASSIGN_OR_RETURN(CommandResult client,
                     Run(from, {"iperf3", "-c", node_address(to), "-p", port, "-t", seconds, "-J"},
                         duration + absl::Seconds(20)));
    absl::StatusOr<double> rate = ParseIperf3ReceivedBitsPerSecond(client.out);
    const bool refused = !rate.ok() && absl::StrContains(rate.status().message(), "refused");
    const bool server_gone = server.Wait(absl::ZeroDuration()).ok();
    if (!refused || server_gone || absl::Now() > deadline) {
      if (rate.ok()) (void)server.Wait(absl::Seconds(5));
      if (!rate.ok()) {
        return absl::Status(rate.status().code(),
                            absl::StrCat("iperf3 node ", from, " -> node ", to, " in cluster ",
                                         name_str_, ": ", rate.status().message(), client.err));
      }
      return rate;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace gravac::netemu

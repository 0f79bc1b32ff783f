// Cluster: an emulated multi-node network on one machine, for tests, benchmarks and gravacrun.
//
// Create(n, link) makes n network namespaces, each with one veth link to a bridge in a hub
// namespace, addresses them in their own /24 of 198.18.0.0/15 and shapes every link with tc (names,
// addresses: naming.h; shaping: shaping.h). There is no default route in any namespace: a node can
// reach the other nodes of its cluster and its own loopback, nothing else. Spawn() runs a process
// inside a node; MeasureRateIperf3() measures the effective rate between two nodes, so results are
// reported as ratios to it.
//
//   ASSIGN_OR_RETURN(auto cluster, Cluster::Create(2, {.rate_bits_per_s = 1e9}));
//   ASSIGN_OR_RETURN(Process server, cluster->Spawn(1, {"my_server", cluster->node_address(1)}));
//   ASSIGN_OR_RETURN(double b_eff, cluster->MeasureRateIperf3(0, 1, absl::Seconds(2)));
//
// Host link. With ClusterOptions::host_link the creator's own namespace gets one unshaped veth
// into the hub's bridge (naming.h: `gvch<subnet>`, address host_link_address()), so processes on
// the host reach every node (gravacrun scrapes the daemons' metrics through it). Node-to-node
// links stay shaped as before; the nodes still have no route beyond the cluster's /24.
//
// Removal. The destructor (or Destroy()) kills every process left in the cluster's namespaces and
// deletes them (and the host link). If the owning process dies without running it (crash, SIGKILL,
// Ctrl-C), a guardian does the same: a `/bin/sh` in its own session reading a pipe that only the
// owner holds; end of file on the pipe means the owner is gone. CleanupStale() removes what even
// the guardian missed (clusters whose creating pid, carried in the name, no longer runs).
//
// Requires root (CAP_NET_ADMIN + CAP_SYS_ADMIN) and iproute2; MeasureRateIperf3 needs iperf3.
// Thread-safety: const methods may be called concurrently; Destroy() must not race with others.
#ifndef GRAVAC_NETEMU_CLUSTER_H_
#define GRAVAC_NETEMU_CLUSTER_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "netemu/naming.h"
#include "netemu/process.h"
#include "netemu/shaping.h"

namespace gravac::netemu {

struct ClusterOptions {
  std::string name_prefix = "gravac";
  // Start the guardian (see above). Off only for clusters meant to outlive their creator (the
  // CLI's `create`) and for tests of CleanupStale.
  bool guardian = true;
  // Add the host link (see above); clusters with one have at most 253 nodes.
  bool host_link = false;
};

class Cluster {
 public:
  // Creates a cluster of `nodes` (1..254; 1..253 with a host link) nodes. On any failure everything
  // created so far is removed and the failing command's status (with its stderr) is returned; a
  // delay on a kernel without the netem qdisc gives FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(int nodes, const LinkSpec& link,
                                                         std::string name_prefix = "gravac");
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(int nodes, const LinkSpec& link,
                                                         const ClusterOptions& options);

  // Re-opens a cluster made elsewhere (e.g. by `gravac-netemu create`) from its name. The result
  // does not own the namespaces (its destructor leaves them) until TakeOwnership(). link() is
  // unknown (zero) for an attached cluster.
  static absl::StatusOr<std::unique_ptr<Cluster>> Attach(std::string_view name);

  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  ~Cluster();

  // Kills the processes in the cluster's namespaces and deletes the namespaces. Idempotent;
  // returns the first failure but still tries every namespace.
  absl::Status Destroy();
  // Leaves the namespaces in place when this object goes away (stops the guardian).
  void Release();
  void TakeOwnership() { owned_ = true; }

  const std::string& name() const { return name_str_; }
  int size() const { return nodes_; }
  const LinkSpec& link() const { return link_; }
  std::string node_namespace(int node) const { return name_.NodeNamespace(node); }
  std::string node_address(int node) const { return name_.NodeAddress(node); }
  std::string hub_namespace() const { return name_.HubNamespace(); }
  std::string subnet() const { return name_.SubnetCidr(); }
  bool has_host_link() const { return host_link_; }
  // The host side's address ("" without a host link); the nodes reach the host there.
  std::string host_link_address() const { return host_link_ ? name_.HostLinkAddress() : ""; }
  std::string host_link_device() const { return host_link_ ? name_.HostLinkDevice() : ""; }
  // Every namespace this cluster owns: nodes first, then the hub.
  std::vector<std::string> namespaces() const;

  // Starts argv inside node `node` (see Process::Spawn; options.netns is set here).
  absl::StatusOr<Process> Spawn(int node, const std::vector<std::string>& argv,
                                SpawnOptions options = {}) const;
  // Runs argv to completion inside node `node`, with output captured.
  absl::StatusOr<CommandResult> Run(int node, const std::vector<std::string>& argv,
                                    absl::Duration timeout = absl::Seconds(30)) const;

  // Runs iperf3 (TCP, one stream) for `duration` from node `from` to node `to` and returns the
  // receiver's rate in bit/s. Blocks for about `duration`.
  absl::StatusOr<double> MeasureRateIperf3(int from, int to, absl::Duration duration) const;

 private:
  Cluster(ClusterName name, int nodes, LinkSpec link, bool host_link);
  absl::Status Build();
  absl::Status StartGuardian();
  void StopGuardian();

  ClusterName name_;
  std::string name_str_;
  int nodes_;
  LinkSpec link_;
  bool host_link_ = false;
  bool owned_ = true;
  int guardian_fd_ = -1;  // write end of the guardian's stdin
  Process guardian_;
};

// The names of all namespaces on this machine (`ip netns list`).
absl::StatusOr<std::vector<std::string>> ListNamespaces();

// The clusters visible on this machine whose prefix is `prefix` ("" = any prefix), each with the
// number of node namespaces it has.
absl::StatusOr<std::vector<std::pair<ClusterName, int>>> ListClusters(std::string_view prefix);

// Kills the processes in every namespace of cluster `name` and deletes the namespaces and its
// host link, if any.
absl::Status DestroyClusterNamespaces(const ClusterName& name);

// Removes the clusters with prefix `prefix` ("" = any) whose creating process no longer runs.
// Returns the names of the clusters removed.
absl::StatusOr<std::vector<std::string>> CleanupStale(std::string_view prefix);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_CLUSTER_H_

// Naming and addressing scheme of emulated clusters.
//
// A cluster is named `<prefix>-<pid>-s<subnet>`: `prefix` says who made it (default "gravac"),
// `pid` is the creating process (so a cleanup can tell stale clusters, whose creator is dead, from
// live ones) and `subnet` (0..511) picks the cluster's /24 in the RFC 2544 benchmarking range
// 198.18.0.0/15, which is never routed on real networks:
//
//   subnet s  ->  198.(18 + s / 256).(s % 256).0/24,   node i  ->  host byte i + 1
//
// The cluster owns network namespaces `<name>-hub` (holding the bridge `br0` and the veth ends
// `v<i>`) and `<name>-n<i>` (node i, interface `eth0` and `lo`). Nothing is created in the
// caller's namespace, so two clusters never share a device or a route even when their subnets
// coincide; the creator still picks a subnet no visible cluster uses, so addresses stay unique
// on the machine for anyone reading logs or captures.
//
// Optional host link (ClusterOptions::host_link): one unshaped veth from the creator's namespace
// into the hub's bridge, `gvch<subnet>` on the host side (address host byte kHostLinkByte, e.g.
// 198.18.7.254/24) and `host` in the hub, so the creator can reach every node (e.g. to scrape
// metrics) while the nodes still have no route beyond their /24. The device name in the host
// namespace is unique per subnet, so it also keeps two clusters from sharing a subnet there.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_NETEMU_NAMING_H_
#define GRAVAC_NETEMU_NAMING_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gravac::netemu {

inline constexpr int kNumSubnets = 512;    // /24s in 198.18.0.0/15
inline constexpr int kMaxNodes = 254;      // host bytes 1..254
inline constexpr int kHostLinkByte = 254;  // the host link's address (then <= 253 nodes)

struct ClusterName {
  std::string prefix;
  pid_t pid = 0;
  int subnet = 0;

  std::string ToString() const;  // "<prefix>-<pid>-s<subnet>"
  std::string HubNamespace() const;
  std::string NodeNamespace(int node) const;
  std::string NodeAddress(int node) const;  // dotted quad, e.g. "198.18.7.1"
  std::string SubnetCidr() const;           // e.g. "198.18.7.0/24"
  std::string HostLinkDevice() const;       // host side of the host link, e.g. "gvch7"
  std::string HostLinkAddress() const;      // e.g. "198.18.7.254"
};

// A prefix is 1..32 characters of [A-Za-z0-9_.].
absl::Status ValidatePrefix(std::string_view prefix);

// Parses a cluster name; nullopt when `text` does not follow the scheme.
std::optional<ClusterName> ParseClusterName(std::string_view text);

// The namespace kind of a cluster-owned namespace name: its cluster and node (-1 for the hub).
struct NamespaceRef {
  ClusterName cluster;
  int node = -1;
};
std::optional<NamespaceRef> ParseNamespaceName(std::string_view netns);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_NAMING_H_

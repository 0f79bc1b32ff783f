// gravac-netemu: create, use and remove emulated clusters from the shell (see cluster.h).
//
//   gravac-netemu create --nodes=3 --rate=1e9 --delay_us=100   # prints the cluster's name
//   gravac-netemu run <cluster> <node> -- <program> [args...]
//   gravac-netemu iperf <cluster> <from> <to> --seconds=2
//   gravac-netemu destroy <cluster>
//   gravac-netemu list | cleanup [--prefix=gravac]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/settings.h"
#include "core/status.h"
#include "netemu/cluster.h"

namespace gravac::netemu {
namespace {

constexpr SettingSpec kSettings[] = {
    {"nodes", "", "2", "create: number of nodes", SettingType::kInt},
    {"rate", "", "1e9", "create: link rate in bit/s; iperf: ratio reference", SettingType::kDouble},
    {"delay_us", "", "0", "create: one-way node-to-node delay in microseconds", SettingType::kInt},
    {"prefix", "", "gravac", "create/list/cleanup: cluster name prefix", SettingType::kString},
    {"seconds", "", "2", "iperf: measurement time", SettingType::kInt},
};

constexpr char kUsage[] =
    "usage: gravac-netemu create [--nodes --rate --delay_us --prefix]\n"
    "       gravac-netemu run <cluster> <node> -- <program> [args...]\n"
    "       gravac-netemu iperf <cluster> <from> <to> [--seconds --rate]\n"
    "       gravac-netemu destroy <cluster>\n"
    "       gravac-netemu list|cleanup [--prefix]\n";

absl::StatusOr<int> NodeArg(const std::string& text) {
  int node = 0;
  if (!absl::SimpleAtoi(text, &node)) return absl::InvalidArgumentError("bad node " + text);
  return node;
}

absl::StatusOr<int> Main(const Settings& s) {
  const std::vector<std::string>& args = s.positional();
  if (args.empty()) return absl::InvalidArgumentError(kUsage);
  const std::string& cmd = args[0];
  ASSIGN_OR_RETURN(std::string prefix, s.GetString("prefix"));
  if (cmd == "create" && args.size() == 1) {
    ASSIGN_OR_RETURN(int64_t nodes, s.GetInt("nodes"));
    ASSIGN_OR_RETURN(double rate, s.GetDouble("rate"));
    ASSIGN_OR_RETURN(int64_t delay_us, s.GetInt("delay_us"));
    ASSIGN_OR_RETURN(
        auto cluster,
        Cluster::Create(static_cast<int>(nodes),
                        {.rate_bits_per_s = rate, .delay = absl::Microseconds(delay_us)},
                        ClusterOptions{.name_prefix = prefix, .guardian = false}));
    cluster->Release();
    absl::PrintF("cluster %s subnet %s\n", cluster->name(), cluster->subnet());
    for (int i = 0; i < cluster->size(); ++i) {
      absl::PrintF("node %d netns %s address %s\n", i, cluster->node_namespace(i),
                   cluster->node_address(i));
    }
    return 0;
  }
  if (cmd == "run" && args.size() >= 4) {
    ASSIGN_OR_RETURN(auto cluster, Cluster::Attach(args[1]));
    ASSIGN_OR_RETURN(int node, NodeArg(args[2]));
    std::vector<std::string> argv(args.begin() + 3, args.end());
    ASSIGN_OR_RETURN(Process p, cluster->Spawn(node, argv));
    ASSIGN_OR_RETURN(ExitStatus status, p.Wait());
    return status.term_signal > 0 ? 128 + status.term_signal : status.exit_code;
  }
  if (cmd == "iperf" && args.size() == 4) {
    ASSIGN_OR_RETURN(auto cluster, Cluster::Attach(args[1]));
    ASSIGN_OR_RETURN(int from, NodeArg(args[2]));
    ASSIGN_OR_RETURN(int to, NodeArg(args[3]));
    ASSIGN_OR_RETURN(int64_t seconds, s.GetInt("seconds"));
    ASSIGN_OR_RETURN(double rate, s.GetDouble("rate"));
    ASSIGN_OR_RETURN(double bps, cluster->MeasureRateIperf3(from, to, absl::Seconds(seconds)));
    absl::PrintF("iperf3 node %d -> node %d: %.4g bit/s, %.3f of %.4g bit/s\n", from, to, bps,
                 bps / rate, rate);
    return 0;
  }
  if (cmd == "destroy" && args.size() == 2) {
    std::optional<ClusterName> name = ParseClusterName(args[1]);
    if (!name.has_value()) return absl::InvalidArgumentError("not a cluster name: " + args[1]);
    RETURN_IF_ERROR(DestroyClusterNamespaces(*name));
    return 0;
  }
  if (cmd == "list" && args.size() == 1) {
    ASSIGN_OR_RETURN(auto clusters, ListClusters(prefix));
    for (const auto& [name, nodes] : clusters) {
      absl::PrintF("%s nodes %d subnet %s\n", name.ToString(), nodes, name.SubnetCidr());
    }
    return 0;
  }
  if (cmd == "cleanup" && args.size() == 1) {
    ASSIGN_OR_RETURN(std::vector<std::string> removed, CleanupStale(prefix));
    for (const std::string& name : removed) absl::PrintF("removed %s\n", name);
    return 0;
  }
  return absl::InvalidArgumentError(kUsage);
}

}  // namespace
}  // namespace gravac::netemu

int main(int argc, char** argv) {
  using gravac::Settings;
  std::vector<const char*> args(argv + 1, argv + argc);
  absl::StatusOr<Settings> settings =
      Settings::Parse(gravac::netemu::kSettings, args, gravac::ProcessEnvironment());
  if (settings.ok() && settings->help_requested()) {
    std::fputs(gravac::netemu::kUsage, stdout);
    std::fputs(Settings::Help(gravac::netemu::kSettings, "gravac-netemu").c_str(), stdout);
    return 0;
  }
  absl::StatusOr<int> rc =
      settings.ok() ? gravac::netemu::Main(*settings) : absl::StatusOr<int>(settings.status());
  if (!rc.ok()) {
    absl::FPrintF(stderr, "gravac-netemu: %s\n", rc.status().ToString());
    return 2;
  }
  return *rc;
}

// Metrics targets of a gravacrun job: where the controller and each gravacd serve Prometheus
// metrics, the line gravacrun prints for each, and the Prometheus file_sd JSON that lists them
// (--metrics_sd_file), written so that a watching Prometheus never reads half a file.
//
//   MetricsTarget t{.job = "gravacd", .node = 1, .host = "127.0.0.1", .port = 9471};
//   Describe(t);                       // "node 1 (node1) http://127.0.0.1:9471/metrics"
//   RETURN_IF_ERROR(WriteFileAtomically(path, FileSdJson({t})));
//
// Thread-safety: stateless functions over values.
#ifndef GRAVAC_RUNNER_METRICS_TARGETS_H_
#define GRAVAC_RUNNER_METRICS_TARGETS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gravac::runner {

inline constexpr char kControllerJob[] = "gravac-controller";  // Prometheus job label values
inline constexpr char kDaemonJob[] = "gravacd";

struct MetricsTarget {
  std::string job;    // kControllerJob or kDaemonJob
  int node = -1;      // gravacd's node index; -1 for the controller
  std::string host;   // the address it serves on
  int port = 0;       // the port it bound
  std::string netns;  // set when this machine cannot reach `host` (a namespace without host link)
};

// gravacd's --node_name for node `node`: "node<node>".
std::string NodeName(int node);

// "http://HOST:PORT/metrics".
std::string MetricsUrl(const MetricsTarget& target);

// "controller URL" or "node N (nodeN) URL", plus how to reach it when `netns` is set:
// " (inside the emulated cluster: ip netns exec NETNS curl -s URL)".
std::string Describe(const MetricsTarget& target);

// A Prometheus file_sd file: one group per target, labels job and (daemons) node, e.g.
//   [
//     {"targets": ["127.0.0.1:9470"], "labels": {"job": "gravac-controller"}},
//     {"targets": ["127.0.0.1:9471"], "labels": {"job": "gravacd", "node": "node0"}}
//   ]
// "[]" without targets. Hosts, job names and node names need no JSON escaping.
std::string FileSdJson(const std::vector<MetricsTarget>& targets);

// Writes `text` to `path` through `path`.tmp and a rename. Internal error naming the file.
absl::Status WriteFileAtomically(const std::string& path, std::string_view text);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_METRICS_TARGETS_H_

#include "runner/metrics_targets.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/absl_compat.h"
#include "core/errno_status.h"

namespace gravac::runner {

std::string NodeName(int node) { return StrCat("node", node); }

std::string MetricsUrl(const MetricsTarget& target) {
  return StrCat("http://", target.host, ":", target.port, "/metrics");
}

std::string Describe(const MetricsTarget& target) {
  const std::string url = MetricsUrl(target);
  std::string text = target.node < 0
                         ? StrCat("controller ", url)
                         : StrCat("node ", target.node, " (", NodeName(target.node), ") ", url);
  if (!target.netns.empty()) {
    text += StrCat(" (inside the emulated cluster: ip netns exec ", target.netns, " curl -s ", url,
                   ")");
  }
  return text;
}

std::string FileSdJson(const std::vector<MetricsTarget>& targets) {
  if (targets.empty()) return "[]\n";
  std::string json = "[";
  for (size_t i = 0; i < targets.size(); ++i) {
    const MetricsTarget& t = targets[i];
    json += StrCat(i == 0 ? "\n" : ",\n", "  {\"targets\": [\"", t.host, ":", t.port,
                   "\"], \"labels\": {\"job\": \"", t.job, "\"",
                   t.node >= 0 ? StrCat(", \"node\": \"", NodeName(t.node), "\"") : "", "}}");
  }
  return json + "\n]\n";
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::string tmp = StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::InternalError(StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return ErrnoStatus(absl::StatusCode::kInternal, err,
                       StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace gravac::runner

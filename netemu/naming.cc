#include "netemu/naming.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/absl_compat.h"

namespace gravac::netemu {

std::string ClusterName::ToString() const { return absl::StrCat(prefix, "-", pid, "-s", subnet); }

std::string ClusterName::HubNamespace() const { return absl::StrCat(ToString(), "-hub"); }

std::string ClusterName::NodeNamespace(int node) const {
  return absl::StrCat(ToString(), "-n", node);
}

std::string ClusterName::NodeAddress(int node) const {
  return absl::StrCat("198.", 18 + subnet / 256, ".", subnet % 256, ".", node + 1);
}

std::string ClusterName::SubnetCidr() const {
  return absl::StrCat("198.", 18 + subnet / 256, ".", subnet % 256, ".0/24");
}

std::string ClusterName::HostLinkDevice() const { return absl::StrCat("gvch", subnet); }

std::string ClusterName::HostLinkAddress() const {
  return absl::StrCat("198.", 18 + subnet / 256, ".", subnet % 256, ".", kHostLinkByte);
}

absl::Status ValidatePrefix(std::string_view prefix) {
  bool ok = !prefix.empty() && prefix.size() <= 32;
  for (char c : prefix) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      gravac::StrCat("cluster prefix '", prefix, "' must be 1..32 characters of [A-Za-z0-9_.]"));
}

std::optional<ClusterName> ParseClusterName(std::string_view text) {
  size_t s_pos = text.rfind("-s");
  if (s_pos == std::string_view::npos) return std::nullopt;
  size_t pid_pos = text.rfind('-', s_pos == 0 ? 0 : s_pos - 1);
  if (pid_pos == std::string_view::npos || pid_pos == 0 || pid_pos >= s_pos) return std::nullopt;
  ClusterName name;
  name.prefix = std::string(text.substr(0, pid_pos));
  int pid = 0;
  if (!absl::SimpleAtoi(AsAbsl(text.substr(pid_pos + 1, s_pos - pid_pos - 1)), &pid) || pid <= 0) {
    return std::nullopt;
  }
  if (!absl::SimpleAtoi(AsAbsl(text.substr(s_pos + 2)), &name.subnet) || name.subnet < 0 ||
      name.subnet >= kNumSubnets) {
    return std::nullopt;
  }
  if (!ValidatePrefix(name.prefix).ok()) return std::nullopt;
  name.pid = pid;
  if (name.ToString() != text) return std::nullopt;  // rejects "+7", "007" and the like
  return name;
}

std::optional<NamespaceRef> ParseNamespaceName(std::string_view netns) {
  size_t dash = netns.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  std::optional<ClusterName> cluster = ParseClusterName(netns.substr(0, dash));
  if (!cluster.has_value()) return std::nullopt;
  absl::string_view role = AsAbsl(netns.substr(dash + 1));
  NamespaceRef ref{*cluster, -1};
  if (role == "hub") return ref;
  if (!absl::ConsumePrefix(&role, "n") || !absl::SimpleAtoi(role, &ref.node) || ref.node < 0 ||
      ref.node >= kMaxNodes || absl::StrCat("n", ref.node) != AsAbsl(netns.substr(dash + 1))) {
    return std::nullopt;
  }
  return ref;
}

}  // namespace gravac::netemu

#include "daemon/data_ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/absl_compat.h"

namespace gravac::daemon {

std::string PortRange::ToString() const {
  return any() ? "any" : absl::StrFormat("%d-%d", lo, hi);
}

absl::StatusOr<PortRange> ParsePortRange(std::string_view text) {
  if (text.empty() || text == "0") return PortRange{};
  std::vector<absl::string_view> parts = absl::StrSplit(AsAbsl(text), '-');
  PortRange r;
  const bool parsed = (parts.size() == 1 && absl::SimpleAtoi(parts[0], &r.lo) &&
                       (r.hi = r.lo, true)) ||
                      (parts.size() == 2 && absl::SimpleAtoi(parts[0], &r.lo) &&
                       absl::SimpleAtoi(parts[1], &r.hi));
  if (!parsed || r.lo < 1 || r.hi > 65535 || r.lo > r.hi) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data-plane port range '%s' is not LO-HI with 1 <= LO <= HI <= 65535", AsAbsl(text)));
  }
  return r;
}

absl::Status CheckFreePort(const PortRange& range) {
  if (range.any()) return absl::OkStatus();
  for (int port = range.lo; port <= range.hi; ++port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "data-plane port range %s is exhausted: every port is in use (by other jobs on this node, "
      "connections of a job that ended less than a minute ago, or other programs); widen "
      "--data_port_range (GRAVAC_DATA_PORT_RANGE) and the NetworkPolicy with it",
      range.ToString()));
}

}  // namespace gravac::daemon

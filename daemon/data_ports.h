// The data plane's port range (gravacd --data_port_range=LO-HI): UCX's TCP transport listens only
// on ports of the range (UCX_TCP_PORT_RANGE), so a NetworkPolicy can allow exactly those. Each job
// a daemon serves opens its own listener, so the range bounds the concurrent jobs per node.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_DATA_PORTS_H_
#define GRAVAC_DAEMON_DATA_PORTS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::daemon {

struct PortRange {
  int lo = 0;  // 0 = any port (UCX's choice)
  int hi = 0;
  bool any() const { return lo == 0; }
  std::string ToString() const;  // "30000-30063", or "any"
};

// "" or "0" = any; "LO-HI" with 1 <= LO <= HI <= 65535; "P" = the one port P. InvalidArgument
// naming the text otherwise.
absl::StatusOr<PortRange> ParsePortRange(std::string_view text);

// OK when some port of `range` can be bound for TCP on all addresses now (always for any());
// ResourceExhausted naming the range when every port of it is in use.
absl::Status CheckFreePort(const PortRange& range);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_DATA_PORTS_H_

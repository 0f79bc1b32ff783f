// iperf3 result parsing: the receiver-side throughput from `iperf3 -J` output.
//
// The emulated cluster measures the effective rate of its links with iperf3 in the same run as a
// benchmark, so results can be reported as ratios to it (BENCHMARKS.md). The receiver's figure
// (`end.sum_received.bits_per_second`) is the one that counts: it excludes bytes still queued.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_NETEMU_IPERF_H_
#define GRAVAC_NETEMU_IPERF_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace gravac::netemu {

// Returns end.sum_received.bits_per_second. Fails with Unavailable carrying iperf3's own message
// when the JSON holds an "error" entry, and with InvalidArgument when the figure is missing or
// not a positive number.
absl::StatusOr<double> ParseIperf3ReceivedBitsPerSecond(std::string_view json);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_IPERF_H_

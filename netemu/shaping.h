// Link shaping: the tc commands that give an emulated link its rate and delay.
//
// A link between node i and the cluster's bridge is a veth pair; both ends are shaped, the node's
// `eth0` (node -> bridge) and the hub's `v<i>` (bridge -> node), so every node-to-node path crosses
// two shaped egress queues and is limited to `rate_bits_per_s` in each direction. `delay` is the
// one-way node-to-node delay: each end adds delay / 2 with netem, so a round trip adds 2 * delay.
//
// Qdiscs per end: root `tbf` (handle 1:) and, when a delay is asked for, `netem` as its child
// (handle 10:), so packets are delayed first and rate-limited on the way out.
//
// tbf burst: max(rate x 1 ms, 64 KiB). The bucket must hold at least one GSO super-packet (veth
// passes 64 KiB segments; a smaller bucket makes tbf segment them in software), and a millisecond
// of tokens absorbs late dequeues on a loaded 2-core machine (tokens beyond the bucket are lost,
// so a bucket that is too small under-delivers the rate) while bursts above the rate stay under
// 1 ms of line time. tbf queue: `latency` 5 ms (rate x 5 ms bytes of queue), enough for TCP to
// keep the link busy without adding tens of milliseconds of queueing delay.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_NETEMU_SHAPING_H_
#define GRAVAC_NETEMU_SHAPING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gravac::netemu {

struct LinkSpec {
  double rate_bits_per_s = 1e9;                 // per direction, per node link
  absl::Duration delay = absl::ZeroDuration();  // one-way node-to-node delay
};

// InvalidArgument unless 1 kbit/s <= rate <= 400 Gbit/s and 0 <= delay <= 10 s.
absl::Status ValidateLinkSpec(const LinkSpec& link);

// The tbf bucket size in bytes for `rate_bits_per_s` (see above).
int64_t TbfBurstBytes(double rate_bits_per_s);

// The argv of each `tc` command that shapes device `dev` in namespace `netns` with `link`, applied
// to one end of a link (so `link.delay / 2` of netem delay).
std::vector<std::vector<std::string>> ShapingCommands(const std::string& netns,
                                                      const std::string& dev, const LinkSpec& link);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_SHAPING_H_

#include "netemu/shaping.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gravac::netemu {

absl::Status ValidateLinkSpec(const LinkSpec& link) {
  if (!(link.rate_bits_per_s >= 1e3 && link.rate_bits_per_s <= 4e11)) {
    return absl::InvalidArgumentError(
        absl::StrCat("link rate ", link.rate_bits_per_s, " bit/s is outside [1e3, 4e11] bit/s"));
  }
  if (link.delay < absl::ZeroDuration() || link.delay > absl::Seconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("link delay ", absl::FormatDuration(link.delay), " is outside [0, 10s]"));
  }
  return absl::OkStatus();
}

int64_t TbfBurstBytes(double rate_bits_per_s) {
  const double one_ms_of_bytes = rate_bits_per_s / 8.0 / 1000.0;
  return std::max<int64_t>(static_cast<int64_t>(std::ceil(one_ms_of_bytes)), 64 * 1024);
}

std::vector<std::vector<std::string>> ShapingCommands(const std::string& netns,
                                                      const std::string& dev,
                                                      const LinkSpec& link) {
  const int64_t rate = static_cast<int64_t>(std::llround(link.rate_bits_per_s));
  std::vector<std::vector<std::string>> commands;
  commands.push_back({"tc", "-n", netns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                      "rate", absl::StrCat(rate, "bit"), "burst",
                      absl::StrCat(TbfBurstBytes(link.rate_bits_per_s)), "latency", "5ms"});
  if (link.delay > absl::ZeroDuration()) {
    const absl::Duration half = link.delay / 2;
    // netem holds every packet in flight for `half`: size its queue for rate x half in 1500-byte
    // packets, with headroom, so it never drops on a full link.
    const double in_flight = link.rate_bits_per_s / 8.0 * absl::ToDoubleSeconds(half) / 1500.0;
    const int64_t limit = std::max<int64_t>(1000, static_cast<int64_t>(4 * in_flight));
    commands.push_back({"tc", "-n", netns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle",
                        "10:", "netem", "delay",
                        absl::StrCat(absl::ToInt64Microseconds(half), "us"), "limit",
                        absl::StrCat(limit)});
  }
  return commands;
}

}  // namespace gravac::netemu

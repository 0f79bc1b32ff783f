#include "netemu/shaping.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::netemu {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::ElementsAre;

TEST(ShapingTest, BurstIsOneMillisecondWithAGsoFloor) {
  EXPECT_EQ(TbfBurstBytes(1e9), 125000);     // 1 ms at 1 Gbit/s
  EXPECT_EQ(TbfBurstBytes(25e9), 3125000);   // 1 ms at 25 Gbit/s
  EXPECT_EQ(TbfBurstBytes(1e8), 64 * 1024);  // floor: one 64 KiB GSO segment
}

TEST(ShapingTest, RateOnlyIsOneTbf) {
  auto commands = ShapingCommands("ns0", "eth0", {.rate_bits_per_s = 1e9});
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_THAT(commands[0], ElementsAre("tc", "-n", "ns0", "qdisc", "add", "dev", "eth0", "root",
                                       "handle", "1:", "tbf", "rate", "1000000000bit", "burst",
                                       "125000", "latency", "5ms"));
}

TEST(ShapingTest, DelayIsSplitOverBothEnds) {
  auto commands =
      ShapingCommands("hub", "v1", {.rate_bits_per_s = 1e10, .delay = absl::Milliseconds(2)});
  ASSERT_EQ(commands.size(), 2u);
  // 1 ms per end; 1e10 / 8 * 1e-3 / 1500 = 833 packets in flight, x4 headroom.
  EXPECT_THAT(commands[1],
              ElementsAre("tc", "-n", "hub", "qdisc", "add", "dev", "v1", "parent", "1:1", "handle",
                          "10:", "netem", "delay", "1000us", "limit", "3333"));
}

TEST(ShapingTest, ValidateLinkSpec) {
  EXPECT_THAT(ValidateLinkSpec({.rate_bits_per_s = 1e9}), IsOk());
  EXPECT_THAT(ValidateLinkSpec({.rate_bits_per_s = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateLinkSpec({.rate_bits_per_s = 1e9, .delay = absl::Milliseconds(-1)}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::netemu

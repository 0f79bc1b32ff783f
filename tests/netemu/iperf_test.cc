#include "netemu/iperf.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::netemu {
namespace {

using ::testing::HasSubstr;

// Trimmed from a real `iperf3 -c ... -J` run.
constexpr char kReport[] = R"({
  "start": {"test_start": {"protocol": "TCP", "num_streams": 1}},
  "end": {
    "sum_sent": {"start": 0, "end": 2.0, "bytes": 240123904, "bits_per_second": 960495616.0,
                 "retransmits": 0},
    "sum_received": {"start": 0, "end": 2.0, "bytes": 238026752,
                     "bits_per_second": 952107008.5}
  }
})";

TEST(IperfTest, ReadsTheReceiverRate) {
  absl::StatusOr<double> bps = ParseIperf3ReceivedBitsPerSecond(kReport);
  ASSERT_TRUE(bps.ok()) << bps.status();
  EXPECT_DOUBLE_EQ(*bps, 952107008.5);
}

TEST(IperfTest, ReportsIperfErrors) {
  EXPECT_THAT(ParseIperf3ReceivedBitsPerSecond(
                  R"({"start": {}, "error": "unable to connect to server: Connection refused"})"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Connection refused")));
}

TEST(IperfTest, RejectsMissingOrBadFigures) {
  EXPECT_THAT(ParseIperf3ReceivedBitsPerSecond(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseIperf3ReceivedBitsPerSecond(R"({"end": {"sum_received": {"bytes": 5}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ParseIperf3ReceivedBitsPerSecond(R"({"end": {"sum_received": {"bits_per_second": 0}}})"),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::netemu

#include "core/metrics.h"

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/testing/http_get.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace gravac {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::gravac::testing::HttpGet;

TEST(MetricsAddress, ParsesHostPortAndBarePort) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(ParseMetricsAddress("127.0.0.1:9471", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9471);
  ASSERT_TRUE(ParseMetricsAddress(":0", &host, &port).ok());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseMetricsAddress("[::1]:80", &host, &port).ok());
  EXPECT_EQ(host, "::1");
}

TEST(MetricsAddress, RejectsMalformedAddressesNamingThem) {
  std::string host;
  int port = 0;
  EXPECT_THAT(ParseMetricsAddress("localhost", &host, &port),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'localhost'")));
  EXPECT_THAT(ParseMetricsAddress("h:70000", &host, &port),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("70000")));
  EXPECT_THAT(ParseMetricsAddress("h:x1", &host, &port),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x1")));
  EXPECT_THAT(MetricsEndpoint::Start("nonsense").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MetricsEndpoint, OffKeepsARegistryButServesNothing) {
  for (const char* off : {"off", "", "OFF"}) {
    ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start(off));
    EXPECT_FALSE(endpoint->serving());
    EXPECT_EQ(endpoint->port(), 0);
    EXPECT_EQ(endpoint->url(), "");
    auto& family = prometheus::BuildCounter().Name("gravac_test_total").Help("t").Register(
        endpoint->registry());
    family.Add({}).Increment(2);
    EXPECT_THAT(SerializeMetrics(endpoint->registry()), HasSubstr("gravac_test_total 2"));
  }
}

TEST(MetricsEndpoint, ServesTheRegistryOverHttpOnAPickedPort) {
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("127.0.0.1:0"));
  ASSERT_TRUE(endpoint->serving());
  EXPECT_GT(endpoint->port(), 0);
  EXPECT_EQ(endpoint->url(), "http://127.0.0.1:" + std::to_string(endpoint->port()) + "/metrics");
  auto& family =
      prometheus::BuildCounter().Name("gravac_test_events_total").Help("events").Register(
          endpoint->registry());
  family.Add({{"kind", "a"}}).Increment(3);
  const std::string response = HttpGet(endpoint->port(), "/metrics");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("# TYPE gravac_test_events_total counter"));
  EXPECT_THAT(response, HasSubstr("gravac_test_events_total{kind=\"a\"} 3"));
  // The health endpoint of probes: 200 while serving, none of the metrics.
  const std::string health = HttpGet(endpoint->port(), "/healthz");
  EXPECT_THAT(health, HasSubstr("200 OK"));
  EXPECT_THAT(health, ::testing::Not(HasSubstr("gravac_test_events_total")));
  EXPECT_THAT(HttpGet(endpoint->port(), "/nothing"), ::testing::Not(HasSubstr("200 OK")));
}

TEST(MetricsEndpoint, ABusyPortIsUnavailableWithAHint) {
  ASSERT_OK_AND_ASSIGN(auto first, MetricsEndpoint::Start("127.0.0.1:0"));
  const std::string busy = "127.0.0.1:" + std::to_string(first->port());
  EXPECT_THAT(MetricsEndpoint::Start(busy).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("metrics_address=off")));
}

TEST(MetricsEndpoint, StoppingDoesNotWaitForTheServersPollQuantum) {
  // civetweb polls its listening socket in 2 s quanta; the endpoint wakes it when stopping.
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("0.0.0.0:0"));
  ASSERT_TRUE(endpoint->serving());
  const absl::Time start = absl::Now();
  endpoint.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(MetricsHelpers, ExponentialBucketsAndStatusKinds) {
  EXPECT_THAT(ExponentialBuckets(0.001, 10, 4), ElementsAre(0.001, 0.01, 0.1, 1.0));
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
  EXPECT_EQ(StatusKindLabel(absl::DeadlineExceededError("x")), "deadline_exceeded");
  EXPECT_EQ(StatusKindLabel(absl::FailedPreconditionError("x")), "failed_precondition");
  EXPECT_EQ(StatusKindLabel(absl::OkStatus()), "ok");
}

}  // namespace
}  // namespace gravac

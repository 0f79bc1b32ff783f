// FailureReporter against a real gravac.v1.Controller server (ControllerServer on 127.0.0.1:0):
// a queued report fails the job at the controller (a node's waiting Join ends with the failure),
// each job is reported once, and neither Report nor the destructor blocks on an unreachable
// controller.
#include "daemon/control/failure_reporter.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "controller/controller_service.h"
#include "core/testing/status_matchers.h"
#include "daemon/control/controller_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

using ::gravac::controller::ControllerServer;
using ::gravac::controller::ControllerServerOptions;
using ::testing::HasSubstr;

Logger* TestLog() {
  static Logger* log = new Logger("test", LogLevel::kInfo);
  return log;
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

TEST(FailureReporter, FailsTheJobOnceFromItsOwnThread) {
  ControllerServerOptions o;
  o.security = proto::GrpcSecurity::Plaintext();
  o.listen = "127.0.0.1:0";
  o.coordinator.log = TestLog();
  o.coordinator.nodes = 2;
  o.coordinator.join_timeout = absl::Seconds(30);
  o.shutdown_grace = absl::Milliseconds(200);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ControllerServer> server, ControllerServer::Start(o));
  const std::string address = absl::StrFormat("127.0.0.1:%d", server->port());

  ControllerClientOptions co;
  co.address = address;
  co.security = proto::GrpcSecurity::Plaintext();
  co.join_timeout = absl::Seconds(25);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ControllerClient> node0, ControllerClient::Create(co));
  JoinInfo info{"node0", 0, 1, 2, "address-of-node-0"};
  info.job = {"j", "r1"};
  absl::Status joined = absl::UnknownError("not returned");
  std::thread join([&] { joined = node0->Join(info).status(); });

  FailureReporter reporter({.controller = address,
                            .security = proto::GrpcSecurity::Plaintext(),
                            .node_name = "node1",
                            .log = TestLog()});
  absl::SleepFor(absl::Milliseconds(200));  // node0's Join is in
  const absl::Time start = absl::Now();
  EXPECT_TRUE(reporter.Report({"j", "r1"}, 1, absl::ResourceExhaustedError("no free slots")));
  EXPECT_FALSE(reporter.Report({"j", "r1"}, 1, absl::InternalError("again")));  // once per job
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));  // queued, not sent by the caller
  join.join();
  EXPECT_THAT(joined, StatusIs(absl::StatusCode::kAborted,
                               HasSubstr("job 'j' run 'r1' failed on node 'node1' (node rank 1): "
                                         "no free slots")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(WaitFor([&] { return reporter.sent() == 1; }));
  // Another run of the job is another job.
  EXPECT_TRUE(reporter.Report({"j", "r2"}, -1, absl::ResourceExhaustedError("no free slots")));
  EXPECT_TRUE(WaitFor([&] { return reporter.sent() == 2; }));
  EXPECT_EQ(reporter.sent(), 2);
}

TEST(FailureReporter, AnUnreachableControllerBlocksNeitherReportNorShutdown) {
  const absl::Time start = absl::Now();
  {
    FailureReporter reporter({.controller = "127.0.0.1:1",
                              .security = proto::GrpcSecurity::Plaintext(),
                              .node_name = "node1",
                              .log = TestLog(),
                              .timeout = absl::Seconds(2)});
    EXPECT_TRUE(reporter.Report({"j", "r1"}, 0, absl::InternalError("crashed")));
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
    EXPECT_TRUE(WaitFor([&] { return reporter.sent() == 1; }, absl::Seconds(5)));
    EXPECT_THAT(FailureReporter::ReportNow({.controller = "127.0.0.1:1",
                                            .security = proto::GrpcSecurity::Plaintext(),
                                            .node_name = "node1",
                                            .timeout = absl::Seconds(2)},
                                           {"j", "r2"}, 0, absl::InternalError("crashed")),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("job 'j'")));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
}

}  // namespace
}  // namespace gravac::daemon

// gravacd's settings and node placement (daemon/gravacd.h); the daemon itself runs in job_test.
#include "daemon/gravacd.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Pair;

// Plain text unless the test's environment says otherwise: these tests are about the other
// settings (TLS settings are tested in proto_grpc_security_test).
absl::StatusOr<GravacdOptions> Parse(std::vector<const char*> args,
                                     std::map<std::string, std::string, std::less<>> env = {}) {
  env.emplace("GRAVAC_INSECURE_PLAINTEXT", "true");
  ASSIGN_OR_RETURN(Settings s,
                   Settings::Parse(GravacdSettings(), args, FixedEnvironment(std::move(env))));
  return GravacdOptionsFromSettings(s);
}

TEST(GravacdOptionsTest, FlagsAndEnvironment) {
  ASSERT_OK_AND_ASSIGN(GravacdOptions o,
                       Parse({"--controller=10.0.0.1:7070", "--local_size=4", "--ucx_tls", "tcp",
                              "--cycle_time_ms=2.5", "--op_timeout_s=5"},
                             {{"GRAVAC_DAEMON_SOCKET", "/run/g.sock"},
                              {"GRAVAC_FUSION_THRESHOLD", "1024"},
                              {"GRAVAC_STEP_LOG", "/tmp/steps"}}));
  EXPECT_EQ(o.controller, "10.0.0.1:7070");
  EXPECT_EQ(o.socket_path, "/run/g.sock");
  EXPECT_EQ(o.local_size, 4);
  EXPECT_EQ(o.transport, "ucx");
  EXPECT_EQ(o.ucx_tls, "tcp");
  EXPECT_EQ(o.fusion_threshold_bytes, 1024u);
  EXPECT_EQ(o.cycle_time, absl::Microseconds(2500));
  EXPECT_EQ(o.op_timeout, absl::Seconds(5));
  EXPECT_EQ(o.stall_warning, absl::Seconds(60));
  EXPECT_EQ(o.step_log, "/tmp/steps");
  EXPECT_EQ(o.node_rank, -1);
  EXPECT_EQ(o.nodes, 0);
}

// Every wait is bounded by --stall_timeout_s: the data-plane silence bound never exceeds it.
TEST(GravacdOptionsTest, StallTimeoutBoundsTheDataPlaneSilence) {
  ASSERT_OK_AND_ASSIGN(GravacdOptions o,
                       Parse({"--controller=h:1", "--socket=/s", "--stall_timeout_s=3"}));
  EXPECT_EQ(o.stall_timeout, absl::Seconds(3));
  EXPECT_EQ(o.op_timeout, absl::Seconds(3));
  ASSERT_OK_AND_ASSIGN(o, Parse({"--controller=h:1", "--socket=/s", "--op_timeout_s=2",
                                 "--stall_timeout_s=3"}));
  EXPECT_EQ(o.op_timeout, absl::Seconds(2));
}

TEST(GravacdOptionsTest, RequiredAndRanges) {
  EXPECT_THAT(Parse({"--socket=/s"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--controller")));
  EXPECT_THAT(Parse({"--controller=h:1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--socket")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--local_size=0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--local_size")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--op_timeout_s=0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--op_timeout_s")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--cycle_time_ms=-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--cycle_time_ms")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--local_size=x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'local_size'")));
}

// Issue 18: the nccl transport carries device memory only and gravacd's collectives reduce in
// host memory, so --transport nccl is refused while the settings are parsed, naming both (in a
// build without NCCL, as an unknown transport). Unknown names are refused there too.
TEST(GravacdOptionsTest, TransportThatCannotCarryHostBuffersIsRefusedAtStart) {
  absl::StatusOr<GravacdOptions> nccl =
      Parse({"--controller=h:1", "--socket=/s", "--transport=nccl"});
  EXPECT_THAT(nccl, StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("--transport"), HasSubstr("'nccl'"))));
  if (absl::StrContains(nccl.status().message(), "carries")) {
    EXPECT_THAT(nccl.status().message(),
                AllOf(HasSubstr("device memory only"), HasSubstr("host buffers")));
  }
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s"}, {{"GRAVAC_TRANSPORT", "nccl"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'nccl'")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--transport=carrier-pigeon"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown transport 'carrier-pigeon'")));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--transport=loopback"}), IsOk());
}

// Issue 18 item 3: --device_collectives picks the engine's collectives for device buffers.
// nccl is refused at start by a build without NCCL, naming both sides; host is the default
// until the engine uses the device collectives (an NCCL communicator nothing uses is only cost).
TEST(GravacdOptionsTest, DeviceCollectivesSetting) {
  absl::StatusOr<GravacdOptions> plain = Parse({"--controller=h:1", "--socket=/s"});
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ(plain->device_collectives, DeviceCollectivesSetting::kHost);
  EXPECT_EQ(plain->nccl_device, 0);
  absl::StatusOr<GravacdOptions> host =
      Parse({"--controller=h:1", "--socket=/s"}, {{"GRAVAC_DEVICE_COLLECTIVES", "HOST"}});
  ASSERT_THAT(host, IsOk());
  EXPECT_EQ(host->device_collectives, DeviceCollectivesSetting::kHost);
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--device_collectives=mpi"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--device_collectives"), HasSubstr("'mpi'"),
                             HasSubstr("auto, host, nccl"))));
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--nccl_device=-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--nccl_device")));
  absl::StatusOr<GravacdOptions> nccl =
      Parse({"--controller=h:1", "--socket=/s", "--device_collectives=nccl", "--nccl_device=1"});
  if (collectives::NcclDeviceCollectivesBuilt()) {
    ASSERT_THAT(nccl, IsOk());
    EXPECT_EQ(nccl->device_collectives, DeviceCollectivesSetting::kNccl);
    EXPECT_EQ(nccl->nccl_device, 1);
  } else {
    EXPECT_THAT(nccl,
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("--device_collectives=nccl"), HasSubstr("device buffers"),
                               HasSubstr("built without NCCL"), HasSubstr("host memory"))));
  }
  EXPECT_THAT(GravacdBuild(),
              HasSubstr(collectives::NcclDeviceCollectivesBuilt() ? "device collectives: host, nccl"
                                                                  : "device collectives: host"));
}

TEST(GravacdOptionsTest, MetricsSettings) {
  ASSERT_OK_AND_ASSIGN(GravacdOptions d, Parse({"--controller=h:1", "--socket=/s"}));
  EXPECT_EQ(d.metrics_address, "0.0.0.0:9471");
  EXPECT_EQ(d.metrics_port_file, "");
  ASSERT_OK_AND_ASSIGN(GravacdOptions e,
                       Parse({"--controller=h:1", "--socket=/s", "--metrics_port_file=/tmp/p"},
                             {{"GRAVAC_METRICS_ADDRESS", "127.0.0.1:0"}}));
  EXPECT_EQ(e.metrics_address, "127.0.0.1:0");
  EXPECT_EQ(e.metrics_port_file, "/tmp/p");
  for (const char* ok : {"off", "OFF", ":9000", "[::1]:0", "localhost:1"}) {
    EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--metrics_address", ok}), IsOk()) << ok;
  }
  for (const char* bad : {"nonsense", "h:99999", "h:x", "h:"}) {
    EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--metrics_address", bad}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--metrics_address")))
        << bad;
  }
}

TEST(GravacdOptionsTest, JobIdentityAndDataPortRange) {
  ASSERT_OK_AND_ASSIGN(GravacdOptions d, Parse({"--controller=h:1", "--socket=/s"}));
  EXPECT_EQ(d.job, (JobId{"default", ""}));
  EXPECT_TRUE(d.data_ports.any());
  ASSERT_OK_AND_ASSIGN(GravacdOptions e,
                       Parse({"--controller=h:1", "--socket=/s", "--job_name=resnet"},
                             {{"GRAVAC_RUN_ID", "r1"}, {"GRAVAC_DATA_PORT_RANGE", "30000-30063"}}));
  EXPECT_EQ(e.job, (JobId{"resnet", "r1"}));
  EXPECT_EQ(e.data_ports.lo, 30000);
  EXPECT_EQ(e.data_ports.hi, 30063);
  EXPECT_EQ(e.data_ports.ToString(), "30000-30063");
  ASSERT_OK_AND_ASSIGN(GravacdOptions one,
                       Parse({"--controller=h:1", "--socket=/s", "--data_port_range=4000"}));
  EXPECT_EQ(one.data_ports.ToString(), "4000-4000");
  for (const char* bad : {"10-5", "0-9", "1-70000", "a-b", "1-2-3"}) {
    EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--data_port_range", bad}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--data_port_range")))
        << bad;
  }
  EXPECT_THAT(Parse({"--controller=h:1", "--socket=/s", "--run_id=a b"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--job_name/--run_id")));
}

// A range whose every port is held (here by a listener of the test) is exhausted, with an error
// that says how to fix it; a range with a free port is not.
TEST(DataPortsTest, AnExhaustedRangeIsAClearError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ASSERT_OK_AND_ASSIGN(PortRange held, ParsePortRange(std::to_string(port)));
  EXPECT_THAT(CheckFreePort(held),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(held.ToString()), HasSubstr("--data_port_range"))));
  ::close(fd);
  EXPECT_THAT(CheckFreePort(held), IsOk());
  EXPECT_THAT(CheckFreePort(PortRange{}), IsOk());
}

TEST(GravacdMetricsTest, OffServesNothingAndWritesNoPortFile) {
  const std::string dir = ::testing::TempDir();
  const std::string log_path = dir + "/gravacd_metrics_off_" + std::to_string(getpid());
  const std::string port_file = log_path + ".port";
  std::FILE* sink = std::fopen(log_path.c_str(), "w+");
  ASSERT_NE(sink, nullptr);
  Logger log("gravacd[test]", LogLevel::kInfo, sink);
  GravacdOptions o;
  o.metrics_address = "off";
  o.metrics_port_file = port_file;
  ASSERT_OK_AND_ASSIGN(auto endpoint, StartGravacdMetrics(o, &log));
  EXPECT_FALSE(endpoint->serving());
  EXPECT_EQ(endpoint->url(), "");
  EXPECT_NE(access(port_file.c_str(), F_OK), 0);
  std::fflush(sink);
  std::rewind(sink);
  char buf[512] = {};
  const size_t got = std::fread(buf, 1, sizeof(buf) - 1, sink);
  std::fclose(sink);
  std::remove(log_path.c_str());
  EXPECT_THAT(std::string(buf, got), HasSubstr("metrics: off"));
}

TEST(NodePlacementTest, FromFlags) {
  EXPECT_THAT(*NodePlacement(3, 2, 5, 1, 2), Pair(1, 2));
  EXPECT_THAT(NodePlacement(0, 1, 2, 2, 2), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(NodePlacement(0, 1, 2, 0, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(NodePlacementTest, NodesAloneChecksTheDerivedCount) {
  EXPECT_THAT(*NodePlacement(2, 2, 4, -1, 2), Pair(1, 2));
  EXPECT_THAT(NodePlacement(0, 2, 4, -1, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--nodes is 3, but the workers make 2 nodes")));
}

TEST(NodePlacementTest, DerivedForEqualNodes) {
  EXPECT_THAT(*NodePlacement(0, 4, 8, -1, 0), Pair(0, 2));
  EXPECT_THAT(*NodePlacement(4, 4, 8, -1, 0), Pair(1, 2));
  EXPECT_THAT(*NodePlacement(0, 1, 1, -1, 0), Pair(0, 1));
  EXPECT_THAT(NodePlacement(3, 2, 5, -1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pass --node_rank")));
}

}  // namespace
}  // namespace gravac::daemon

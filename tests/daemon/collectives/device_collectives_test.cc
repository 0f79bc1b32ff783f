// The DeviceCollectives conformance cases (device_collectives_conformance.h) against the host
// implementation (HostDeviceCollectives over a Communicator): over the loopback transport with
// one thread per rank (p = 1..4), and over the ucx transport (tcp on lo) with one forked process
// per rank (p = 2, 3; UCX state is only ever made in the children). The nccl implementation runs
// the same cases in nccl_device_collectives_test.cc (label gpu). Also: the backends table.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives_backends.h"
#include "daemon/collectives/host_device_collectives.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/rendezvous.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/collectives/device_collectives_conformance.h"

namespace gravac::collectives {
namespace {

using conformance::CaseEnv;
using conformance::ConformanceCase;
using conformance::ConformanceCases;
using conformance::HostBufferOps;
using conformance::SumOrder;
using ::testing::HasSubstr;

// The Communicator's op_timeout: the host collectives' bound. Short for the missing peer.
absl::Duration Bound(const ConformanceCase& c) {
  return c.missing_peer ? absl::Seconds(1) : absl::Seconds(20);
}

CommunicatorOptions CommOptions(const ConformanceCase& c) {
  return {.chunk_bytes = 16 << 10, .max_inflight_chunks = 4, .op_timeout = Bound(c)};
}

absl::Status RunCase(const ConformanceCase& c, Communicator& comm) {
  HostDeviceCollectives dc(comm);
  HostBufferOps mem;
  CaseEnv env{dc, mem, SumOrder::kHostRing, Bound(c)};
  return c.body(env);
}

std::string CaseName(const ConformanceCase& c) { return c.name; }

// ---- loopback, one thread per rank.

using LoopbackParam = std::tuple<int, int>;  // world size, case index

class HostOverLoopbackTest : public ::testing::TestWithParam<LoopbackParam> {};

TEST_P(HostOverLoopbackTest, Conforms) {
  const auto [p, index] = GetParam();
  const ConformanceCase c = ConformanceCases()[index];
  if (c.missing_peer && p < 2) GTEST_SKIP() << "a missing peer needs two ranks";
  transport::loopback::Fabric fabric(p);
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::string> addresses;
  for (int r = 0; r < p; ++r) {
    transport::TransportOptions o;
    o.rank = r;
    o.world_size = p;
    o.context = &fabric;
    auto t = transport::MakeTransport("loopback", o);
    ASSERT_THAT(t, IsOk());
    addresses.push_back((*t)->LocalAddress());
    transports.push_back(*std::move(t));
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < p; ++r) {
    auto comm = Communicator::Connect(*transports[r], addresses, CommOptions(c));
    ASSERT_THAT(comm, IsOk());
    comms.push_back(*std::move(comm));
  }
  const int taking_part = c.missing_peer ? p - 1 : p;
  std::vector<absl::Status> results(taking_part);
  std::vector<std::thread> threads;
  for (int r = 0; r < taking_part; ++r) {
    threads.emplace_back([&, r] { results[r] = RunCase(c, *comms[r]); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < taking_part; ++r) EXPECT_THAT(results[r], IsOk()) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HostOverLoopbackTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Range(0, static_cast<int>(ConformanceCases().size()))),
    [](const ::testing::TestParamInfo<LoopbackParam>& info) {
      return absl::StrCat(CaseName(ConformanceCases()[std::get<1>(info.param)]), "_p",
                          std::get<0>(info.param));
    });

// ---- ucx (tcp on lo), one forked process per rank.

class TempDir {
 public:
  TempDir() {
    std::string path = (std::filesystem::temp_directory_path() / "gravac-devcoll-XXXXXX").string();
    if (mkdtemp(path.data()) != nullptr) path_ = path;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

constexpr absl::Duration kRendezvous = absl::Seconds(30);

// The whole life of one rank in its process.
absl::Status UcxRank(int rank, int p, const ConformanceCase& c, const std::string& dir) {
  transport::TransportOptions o;
  o.rank = rank;
  o.world_size = p;
  o.op_timeout = absl::Seconds(20);
  o.params = {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}};
  ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> t, transport::MakeTransport("ucx", o));
  transport::FileRendezvous rendezvous(dir + "/addresses", rank, p, kRendezvous);
  ASSIGN_OR_RETURN(std::vector<std::string> addresses, rendezvous.Exchange(t->LocalAddress()));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Communicator::Connect(*t, addresses, CommOptions(c)));
  if (c.missing_peer && rank == p - 1) {
    // Never arrives: alive and silent until the others must have given up.
    absl::SleepFor(Bound(c) + absl::Seconds(4));
    return absl::OkStatus();
  }
  absl::Status status = RunCase(c, *comm);
  if (status.ok() && !c.missing_peer) {
    // Nobody closes its endpoints while a peer may still receive.
    transport::FileRendezvous done(dir + "/done", rank, p, kRendezvous);
    RETURN_IF_ERROR(done.Exchange("ok").status());
  }
  return status;
}

using UcxParam = std::tuple<int, int>;
class HostOverUcxTest : public ::testing::TestWithParam<UcxParam> {};

TEST_P(HostOverUcxTest, Conforms) {
  const auto [p, index] = GetParam();
  const ConformanceCase c = ConformanceCases()[index];
  bool built = false;
  for (const auto& backend : transport::TransportBackends()) built |= backend.name == "ucx";
  if (!built) GTEST_SKIP() << "the ucx transport is not built";
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<pid_t> pids;
  std::vector<int> reports;
  for (int r = 0; r < p; ++r) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    std::fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      const absl::Status s = UcxRank(r, p, c, dir.path());
      const std::string report = s.ToString();
      (void)!write(fds[1], report.data(), report.size());
      _exit(s.ok() ? 0 : 1);
    }
    close(fds[1]);
    pids.push_back(pid);
    reports.push_back(fds[0]);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  for (int r = 0; r < p; ++r) {
    std::string report;
    char buf[4096];
    while (true) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd pfd{reports[r], POLLIN, 0};
      if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = read(reports[r], buf, sizeof(buf));
      if (n <= 0) break;
      report.append(buf, n);
    }
    close(reports[r]);
    if (absl::Now() >= deadline) kill(pids[r], SIGKILL);
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " (status " << status << "): " << report;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HostOverUcxTest,
    ::testing::Combine(::testing::Values(2, 3),
                       ::testing::Range(0, static_cast<int>(ConformanceCases().size()))),
    [](const ::testing::TestParamInfo<UcxParam>& info) {
      return absl::StrCat(CaseName(ConformanceCases()[std::get<1>(info.param)]), "_p",
                          std::get<0>(info.param));
    });

// ---- the backends table.

TEST(DeviceCollectivesBackendsTest, HostIsAlwaysBuiltAndCarriesHostMemory) {
  transport::loopback::Fabric fabric(1);
  transport::TransportOptions o;
  o.context = &fabric;
  auto t = transport::MakeTransport("loopback", o);
  ASSERT_THAT(t, IsOk());
  auto comm = Communicator::Connect(**t, {(*t)->LocalAddress()}, {});
  ASSERT_THAT(comm, IsOk());
  std::unique_ptr<DeviceCollectives> dc = MakeHostDeviceCollectives(**comm);
  EXPECT_EQ(dc->name(), "host");
  EXPECT_EQ(dc->memory_type(), MemoryType::kHost);
  EXPECT_EQ(dc->device(), -1);
  EXPECT_EQ(dc->stream(), nullptr);
}

TEST(DeviceCollectivesBackendsTest, NcclWithoutNcclIsRefusedWithTheReason) {
  if (NcclDeviceCollectivesBuilt()) {
    GTEST_SKIP() << "built with NCCL: nccl_device_collectives_test covers it (label gpu)";
  }
  transport::loopback::Fabric fabric(1);
  transport::TransportOptions o;
  o.context = &fabric;
  auto t = transport::MakeTransport("loopback", o);
  ASSERT_THAT(t, IsOk());
  auto comm = Communicator::Connect(**t, {(*t)->LocalAddress()}, {});
  ASSERT_THAT(comm, IsOk());
  EXPECT_THAT(MakeNcclDeviceCollectives(**comm, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("without CUDA or NCCL")));
}

}  // namespace
}  // namespace gravac::collectives

// UCX transport tests. Every rank is a real forked process (UCX state is never created in the
// test process itself, so forks stay clean); ranks swap LocalAddress() blobs through pipes and
// report back through a pipe. Ranks run over TCP on loopback, over shared memory, and across two
// network namespaces of an emulated cluster (that test needs root and skips without it).
#include "daemon/transport/ucx/transport.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/transport/ucx/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/netns.h"

namespace gravac::transport::ucx {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(20);
using Env = std::vector<std::pair<std::string, std::string>>;

struct RankSpec {
  std::string netns;  // "" = the test's own namespace
  Env env;            // set with setenv before the transport is made
  Env params;         // TransportOptions::params
  absl::Duration op_timeout = absl::Seconds(30);
};

RankSpec WithEnv(Env env) {
  RankSpec spec;
  spec.env = std::move(env);
  return spec;
}
RankSpec WithParams(Env params, absl::Duration op_timeout = absl::Seconds(30)) {
  RankSpec spec;
  spec.params = std::move(params);
  spec.op_timeout = op_timeout;
  return spec;
}
const Env kTcpOnLo = {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}};

// What a rank process reported: "OK <text>" or "ERROR <status>", and how it ended.
struct RankResult {
  std::string report;
  int exit_code = -1;
  int term_signal = 0;
};

// A rank's part of a test: runs with its transport and its endpoint to the other rank, may add
// text to `report`, returns the verdict.
using Scenario = std::function<absl::Status(Transport&, Endpoint&, std::string& report)>;

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n <= 0) return absl::InternalError("write to pipe failed");
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadBlob(int fd) {
  uint64_t size = 0;
  if (read(fd, &size, sizeof(size)) != sizeof(size)) return absl::InternalError("no blob size");
  std::string blob(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, blob.data() + got, size - got);
    if (n <= 0) return absl::InternalError("short blob");
    got += n;
  }
  return blob;
}

// Body of rank `rank`'s process.
// A rank's part of an N-rank test: endpoints[q] reaches rank q (null for the rank itself).
using MultiScenario = std::function<absl::Status(
    Transport&, std::vector<std::unique_ptr<Endpoint>>& endpoints, std::string& report)>;

// Body of rank `rank`'s process: make the transport, send its address (prefixed by the rank) to
// every other rank's inbox, read theirs from its own, connect, run the scenario.
absl::Status RankMain(int rank, const RankSpec& spec, const std::vector<int>& inbox_writers,
                      int inbox, const MultiScenario& scenario, std::string& report) {
  if (!spec.netns.empty()) RETURN_IF_ERROR(netemu::EnterNetns(spec.netns));
  for (const auto& [key, value] : spec.env) setenv(key.c_str(), value.c_str(), 1);
  const int world = static_cast<int>(inbox_writers.size());
  TransportOptions options;
  options.rank = rank;
  options.world_size = world;
  options.op_timeout = spec.op_timeout;
  options.params = spec.params;
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, MakeTransport(options));
  const std::string blob = absl::StrCat(rank, " ", transport->LocalAddress());
  const uint64_t size = blob.size();
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    RETURN_IF_ERROR(
        WriteAll(inbox_writers[q], std::string(reinterpret_cast<const char*>(&size), 8) + blob));
  }
  std::vector<std::unique_ptr<Endpoint>> endpoints(world);
  for (int k = 0; k < world - 1; ++k) {
    ASSIGN_OR_RETURN(std::string peer_blob, ReadBlob(inbox));
    const size_t space = peer_blob.find(' ');
    const int peer = std::atoi(peer_blob.substr(0, space).c_str());
    ASSIGN_OR_RETURN(endpoints[peer], transport->Connect(peer, peer_blob.substr(space + 1)));
  }
  return scenario(*transport, endpoints, report);
}

// Forks one process per spec, runs their scenarios and collects their reports (bounded by
// `limit`; ranks still running then are killed).
std::vector<RankResult> RunRanks(const std::vector<RankSpec>& specs,
                                 const std::vector<MultiScenario>& scenarios,
                                 absl::Duration limit = absl::Seconds(60)) {
  const int world = static_cast<int>(specs.size());
  std::vector<int> inbox_read(world), inbox_write(world), result_read(world), result_write(world);
  for (int r = 0; r < world; ++r) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return {};
    inbox_read[r] = in[0];
    inbox_write[r] = in[1];
    result_read[r] = out[0];
    result_write[r] = out[1];
  }
  std::vector<pid_t> pids(world);
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      std::string report;
      absl::Status s = RankMain(r, specs[r], inbox_write, inbox_read[r], scenarios[r], report);
      std::string line =
          s.ok() ? absl::StrCat("OK ", report) : absl::StrCat("ERROR ", s.ToString());
      (void)WriteAll(result_write[r], line);
      _exit(s.ok() ? 0 : 1);
    }
  }
  for (int r = 0; r < world; ++r) {
    close(inbox_read[r]);
    close(inbox_write[r]);
    close(result_write[r]);
  }
  std::vector<RankResult> results(world);
  const absl::Time deadline = absl::Now() + limit;
  for (int r = 0; r < world; ++r) {
    char buf[4096];
    while (true) {
      pollfd pfd = {result_read[r], POLLIN, 0};
      int left_ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
      if (poll(&pfd, 1, left_ms) <= 0) {
        results[r].report += " [timed out]";
        break;
      }
      ssize_t n = read(result_read[r], buf, sizeof(buf));
      if (n <= 0) break;
      results[r].report.append(buf, n);
    }
    close(result_read[r]);
  }
  for (int r = 0; r < world; ++r) {
    kill(pids[r], SIGKILL);  // no-op for a rank that already exited (it is a zombie until reaped)
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) results[r].term_signal = WTERMSIG(status);
  }
  return results;
}

std::vector<RankResult> RunTwoRanks(const RankSpec (&specs)[2], const Scenario (&scenarios)[2],
                                    absl::Duration limit = absl::Seconds(60)) {
  std::vector<MultiScenario> multi;
  for (int r = 0; r < 2; ++r) {
    multi.push_back([&scenario = scenarios[r], r](
                        Transport& t, std::vector<std::unique_ptr<Endpoint>>& eps,
                        std::string& report) { return scenario(t, *eps[1 - r], report); });
  }
  return RunRanks({specs[0], specs[1]}, multi, limit);
}

std::vector<uint8_t> Pattern(size_t size, int seed) {
  std::vector<uint8_t> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(i * 31 + seed);
  return data;
}

// Rank 0 sends messages of several sizes (0 B, 1 B, eager, 1 MiB still eager, above
// kEagerMessageLimit by rendezvous); rank 1 checks them and echoes each back; then three messages
// with one tag arrive in order, and two tags posted in the opposite order both complete. Reports
// DescribeEndpoint.
absl::Status Exchange(Transport& t, Endpoint& ep, std::string& report) {
  const bool sender = t.rank() == 0;
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{4097}, size_t{1} << 20, kEagerMessageLimit + 4097}) {
    std::vector<uint8_t> expected = Pattern(size, static_cast<int>(size % 251));
    std::vector<uint8_t> buf(size + 16, 0);
    if (sender) {
      ASSIGN_OR_RETURN(auto send, ep.Isend(expected.data(), size, size));
      ASSIGN_OR_RETURN(auto recv, ep.Irecv(buf.data(), buf.size(), size + 1));
      RETURN_IF_ERROR(send->Wait(kWait));
      RETURN_IF_ERROR(recv->Wait(kWait));
      if (recv->bytes() != size || !std::equal(expected.begin(), expected.end(), buf.begin())) {
        return absl::DataLossError(absl::StrCat("echo of ", size, " bytes differs"));
      }
    } else {
      ASSIGN_OR_RETURN(auto recv, ep.Irecv(buf.data(), buf.size(), size));
      RETURN_IF_ERROR(recv->Wait(kWait));
      if (recv->bytes() != size || !std::equal(expected.begin(), expected.end(), buf.begin())) {
        return absl::DataLossError(absl::StrCat("message of ", size, " bytes differs"));
      }
      ASSIGN_OR_RETURN(auto send, ep.Isend(buf.data(), size, size + 1));
      RETURN_IF_ERROR(send->Wait(kWait));
    }
  }
  int values[3] = {1, 2, 3};
  int got[3] = {0, 0, 0};
  uint64_t first = 0, second = 0;
  if (sender) {
    std::vector<std::unique_ptr<Request>> sends;
    for (int& v : values) {
      ASSIGN_OR_RETURN(auto s, ep.Isend(&v, sizeof(v), 77));
      sends.push_back(std::move(s));
    }
    uint64_t eight = 8, nine = 9;
    ASSIGN_OR_RETURN(auto s8, ep.Isend(&eight, 8, 8));
    ASSIGN_OR_RETURN(auto s9, ep.Isend(&nine, 8, 9));
    for (auto& s : sends) RETURN_IF_ERROR(s->Wait(kWait));
    RETURN_IF_ERROR(s8->Wait(kWait));
    RETURN_IF_ERROR(s9->Wait(kWait));
    // Rank 1 confirms, so rank 0 does not tear down before its messages were taken.
    int ack = 0;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&ack, sizeof(ack), 99));
    RETURN_IF_ERROR(r->Wait(kWait));
  } else {
    ASSIGN_OR_RETURN(auto r9, ep.Irecv(&second, 8, 9));
    ASSIGN_OR_RETURN(auto r8, ep.Irecv(&first, 8, 8));
    std::vector<std::unique_ptr<Request>> recvs;
    for (int& g : got) {
      ASSIGN_OR_RETURN(auto r, ep.Irecv(&g, sizeof(g), 77));
      recvs.push_back(std::move(r));
    }
    for (auto& r : recvs) RETURN_IF_ERROR(r->Wait(kWait));
    RETURN_IF_ERROR(r9->Wait(kWait));
    RETURN_IF_ERROR(r8->Wait(kWait));
    if (got[0] != 1 || got[1] != 2 || got[2] != 3 || first != 8 || second != 9) {
      return absl::DataLossError(
          absl::StrCat("order: ", got[0], got[1], got[2], " tags ", first, " ", second));
    }
    int ack = 1;
    ASSIGN_OR_RETURN(auto s, ep.Isend(&ack, sizeof(ack), 99));
    RETURN_IF_ERROR(s->Wait(kWait));
  }
  ASSIGN_OR_RETURN(std::string description, DescribeEndpoint(ep));
  report += description;
  return absl::OkStatus();
}

void ExpectBothOk(const std::vector<RankResult>& results) {
  ASSERT_EQ(results.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].report;
    EXPECT_THAT(results[r].report, ::testing::StartsWith("OK")) << "rank " << r;
  }
}

TEST(UcxTransportTest, TcpOnLoopbackFromTheEnvironment) {
  // UCX_TLS / UCX_NET_DEVICES come from the environment, read by UCX itself.
  RankSpec spec = WithEnv(kTcpOnLo);
  std::vector<RankResult> results = RunTwoRanks({spec, spec}, {Exchange, Exchange});
  ExpectBothOk(results);
  std::printf("rank 0 endpoint:\n%s\n", results[0].report.c_str());
  EXPECT_THAT(results[0].report, AllOf(HasSubstr("tcp/lo"), Not(HasSubstr("posix")),
                                       Not(HasSubstr("sysv")), Not(HasSubstr("cma"))));
}

TEST(UcxTransportTest, SharedMemoryFromParams) {
  RankSpec spec = WithParams({{"UCX_TLS", "shm"}});
  std::vector<RankResult> results = RunTwoRanks({spec, spec}, {Exchange, Exchange});
  ExpectBothOk(results);
  std::printf("rank 0 endpoint:\n%s\n", results[0].report.c_str());
  EXPECT_THAT(results[0].report, Not(HasSubstr("tcp")));
  EXPECT_THAT(results[0].report, ::testing::ContainsRegex("posix|sysv|cma"));
}

TEST(UcxTransportTest, ParamsOverrideTheEnvironment) {
  RankSpec spec = WithParams(kTcpOnLo);
  spec.env = {{"UCX_TLS", "shm"}};
  std::vector<RankResult> results = RunTwoRanks({spec, spec}, {Exchange, Exchange});
  ExpectBothOk(results);
  EXPECT_THAT(results[0].report, AllOf(HasSubstr("tcp/lo"), Not(HasSubstr("posix"))));
}

TEST(UcxTransportTest, TcpBetweenNetworkNamespaces) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  absl::StatusOr<std::unique_ptr<netemu::Cluster>> cluster =
      netemu::Cluster::Create(2, {.rate_bits_per_s = 1e9}, "gvcucx");
  if (!cluster.ok()) GTEST_SKIP() << "no emulated cluster here: " << cluster.status();
  RankSpec specs[2];
  for (int r = 0; r < 2; ++r) {
    specs[r].netns = (*cluster)->node_namespace(r);
    specs[r].env = {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "eth0"}};
  }
  std::vector<RankResult> results = RunTwoRanks(specs, {Exchange, Exchange});
  ExpectBothOk(results);
  std::printf("rank 0 endpoint:\n%s\n", results[0].report.c_str());
  EXPECT_THAT(results[0].report, AllOf(HasSubstr("tcp/eth0"), Not(HasSubstr("tcp/lo"))));
}

TEST(UcxTransportTest, TruncatedReceiveFailsAndTheEndpointStaysUsable) {
  Scenario rank0 = [](Transport&, Endpoint& ep, std::string&) -> absl::Status {
    std::vector<uint8_t> big(100, 7);
    int small = 5;
    ASSIGN_OR_RETURN(auto s1, ep.Isend(big.data(), big.size(), 1));
    ASSIGN_OR_RETURN(auto s2, ep.Isend(&small, sizeof(small), 2));
    RETURN_IF_ERROR(s1->Wait(kWait));
    RETURN_IF_ERROR(s2->Wait(kWait));
    int ack = 0;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&ack, sizeof(ack), 3));
    return r->Wait(kWait);
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    uint8_t tiny[10];
    int small = 0;
    ASSIGN_OR_RETURN(auto r1, ep.Irecv(tiny, sizeof(tiny), 1));
    absl::Status truncated = r1->Wait(kWait);
    if (truncated.code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(absl::StrCat("want InvalidArgument, got ", truncated.ToString()));
    }
    report += truncated.ToString();
    ASSIGN_OR_RETURN(auto r2, ep.Irecv(&small, sizeof(small), 2));
    RETURN_IF_ERROR(r2->Wait(kWait));
    if (small != 5) return absl::DataLossError("second message lost");
    int ack = 1;
    ASSIGN_OR_RETURN(auto s, ep.Isend(&ack, sizeof(ack), 3));
    return s->Wait(kWait);
  };
  std::vector<RankResult> results = RunTwoRanks({RankSpec{}, RankSpec{}}, {rank0, rank1});
  ExpectBothOk(results);
  EXPECT_THAT(results[1].report,
              AllOf(HasSubstr("larger than the 10-byte receive buffer"), HasSubstr("peer rank 0")));
}

TEST(UcxTransportTest, WaitTimesOutAndTheRequestStaysPending) {
  Scenario rank0 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int value = 0;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&value, sizeof(value), 5));
    absl::Status early = r->Wait(absl::Milliseconds(100));
    if (early.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::InternalError(absl::StrCat("want DeadlineExceeded, got ", early.ToString()));
    }
    report += early.ToString();
    int go = 1;  // now let rank 1 send
    ASSIGN_OR_RETURN(auto s, ep.Isend(&go, sizeof(go), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    RETURN_IF_ERROR(r->Wait(kWait));
    return value == 42 ? absl::OkStatus() : absl::DataLossError("wrong value");
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string&) -> absl::Status {
    int go = 0, value = 42;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&go, sizeof(go), 4));
    RETURN_IF_ERROR(r->Wait(kWait));
    ASSIGN_OR_RETURN(auto s, ep.Isend(&value, sizeof(value), 5));
    RETURN_IF_ERROR(s->Wait(kWait));
    int done = 0;  // stay until rank 0 is gone
    ASSIGN_OR_RETURN(auto last, ep.Irecv(&done, sizeof(done), 6));
    (void)last->Wait(absl::Seconds(2));
    return absl::OkStatus();
  };
  std::vector<RankResult> results = RunTwoRanks({RankSpec{}, RankSpec{}}, {rank0, rank1});
  ExpectBothOk(results);
  EXPECT_THAT(results[0].report, HasSubstr("still pending"));
}

// CPU time this process has used.
absl::Duration ProcessCpuTime() {
  timespec ts = {};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

// Waiting blocks in the kernel (the worker's event fd) instead of spinning: a Wait on a receive
// that stays pending for 500 ms, and a Wait that rank 1's message ends 300 ms in, each use a
// small fraction of that time in CPU (a spinning wait uses about all of it on an idle core, and
// still its share of the cores on a loaded machine), and the message wakes the wait at once.
// WaitForActivity returns within its timeout, and a loop over it and Test completes a receive.
void ExpectWaitsSleep(const RankSpec& spec) {
  constexpr absl::Duration kIdle = absl::Milliseconds(500);
  constexpr absl::Duration kMaxCpu = absl::Milliseconds(50);
  Scenario rank0 = [&](Transport& t, Endpoint& ep, std::string& report) -> absl::Status {
    int value = 0;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&value, sizeof(value), 5));
    absl::Duration cpu = ProcessCpuTime();
    absl::Time start = absl::Now();
    absl::Status idle = r->Wait(kIdle);
    absl::StrAppend(&report, "idle wait: ", idle.ToString(), " after ",
                    absl::FormatDuration(absl::Now() - start), " using ",
                    absl::FormatDuration(ProcessCpuTime() - cpu), " CPU; ");
    if (!absl::IsDeadlineExceeded(idle)) return absl::InternalError("want DeadlineExceeded");
    if (ProcessCpuTime() - cpu > kMaxCpu) return absl::InternalError(absl::StrCat("idle Wait spins: ", report));

    start = absl::Now();
    RETURN_IF_ERROR(t.WaitForActivity(absl::Milliseconds(20)));
    if (absl::Now() - start > absl::Seconds(2)) {
      return absl::InternalError("WaitForActivity overran its timeout");
    }

    int go = 1;  // rank 1 sends 300 ms after this arrives
    ASSIGN_OR_RETURN(auto s, ep.Isend(&go, sizeof(go), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    cpu = ProcessCpuTime();
    start = absl::Now();
    RETURN_IF_ERROR(r->Wait(kWait));
    const absl::Duration took = absl::Now() - start;
    absl::StrAppend(&report, "woken after ", absl::FormatDuration(took), " using ",
                    absl::FormatDuration(ProcessCpuTime() - cpu), " CPU; ");
    if (value != 42) return absl::DataLossError("wrong value");
    if (ProcessCpuTime() - cpu > kMaxCpu) return absl::InternalError(absl::StrCat("Wait spins: ", report));
    if (took > absl::Seconds(5)) return absl::InternalError(absl::StrCat("the message did not wake Wait: ", report));

    // The same with WaitForActivity and Test, as the collectives do.
    ASSIGN_OR_RETURN(auto again, ep.Irecv(&value, sizeof(value), 6));
    ASSIGN_OR_RETURN(auto s2, ep.Isend(&go, sizeof(go), 7));
    RETURN_IF_ERROR(s2->Wait(kWait));
    const absl::Time deadline = absl::Now() + kWait;
    for (;;) {
      ASSIGN_OR_RETURN(bool done, again->Test());
      if (done) break;
      if (absl::Now() > deadline) return absl::DeadlineExceededError("no message 6");
      RETURN_IF_ERROR(t.WaitForActivity(absl::Milliseconds(100)));
    }
    return value == 43 ? absl::OkStatus() : absl::DataLossError("wrong value for tag 6");
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string&) -> absl::Status {
    int go = 0, value = 42, value2 = 43;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&go, sizeof(go), 4));
    RETURN_IF_ERROR(r->Wait(kWait));
    absl::SleepFor(absl::Milliseconds(300));
    ASSIGN_OR_RETURN(auto s, ep.Isend(&value, sizeof(value), 5));
    RETURN_IF_ERROR(s->Wait(kWait));
    ASSIGN_OR_RETURN(auto r2, ep.Irecv(&go, sizeof(go), 7));
    RETURN_IF_ERROR(r2->Wait(kWait));
    absl::SleepFor(absl::Milliseconds(100));
    ASSIGN_OR_RETURN(auto s2, ep.Isend(&value2, sizeof(value2), 6));
    RETURN_IF_ERROR(s2->Wait(kWait));
    int done = 0;  // stay until rank 0 is gone
    ASSIGN_OR_RETURN(auto last, ep.Irecv(&done, sizeof(done), 8));
    (void)last->Wait(absl::Seconds(2));
    return absl::OkStatus();
  };
  std::vector<RankResult> results = RunTwoRanks({spec, spec}, {rank0, rank1});
  std::printf("rank 0: %s\n", results[0].report.c_str());
  ExpectBothOk(results);
  EXPECT_THAT(results[0].report, HasSubstr("still pending"));
}

TEST(UcxTransportTest, WaitsBlockInTheKernelOverTcp) { ExpectWaitsSleep(WithEnv(kTcpOnLo)); }

TEST(UcxTransportTest, WaitsBlockInTheKernelOverSharedMemory) {
  ExpectWaitsSleep(WithParams({{"UCX_TLS", "shm"}}));
}

// Rank 1 answers one message and is then SIGKILLed; rank 0's pending receive must fail with
// Unavailable naming rank 1, well before its wait limit.
std::vector<RankResult> RunWithDyingPeer(const RankSpec& spec, absl::Duration limit = kWait) {
  Scenario rank0 = [limit](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int value = 0;
    ASSIGN_OR_RETURN(auto hello, ep.Irecv(&value, sizeof(value), 1));
    RETURN_IF_ERROR(hello->Wait(kWait));
    ASSIGN_OR_RETURN(auto never, ep.Irecv(&value, sizeof(value), 2));
    absl::Time start = absl::Now();
    absl::Status status = never->Wait(limit);
    absl::StrAppend(&report, status.ToString(), " after ",
                    absl::ToInt64Milliseconds(absl::Now() - start), " ms");
    absl::StatusOr<std::unique_ptr<Request>> later = ep.Isend(&value, sizeof(value), 3);
    absl::Status send_status = later.ok() ? (*later)->Wait(limit) : later.status();
    absl::StrAppend(&report, "; later send: ", send_status.ToString());
    return absl::OkStatus();
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string&) -> absl::Status {
    int value = 1;
    ASSIGN_OR_RETURN(auto s, ep.Isend(&value, sizeof(value), 1));
    RETURN_IF_ERROR(s->Wait(kWait));
    absl::SleepFor(absl::Milliseconds(200));  // let the message reach rank 0
    kill(getpid(), SIGKILL);
    return absl::OkStatus();
  };
  return RunTwoRanks({spec, spec}, {rank0, rank1});
}

TEST(UcxTransportTest, DeadPeerOverTcpGivesUnavailableNotAHang) {
  std::vector<RankResult> results = RunWithDyingPeer(WithEnv(kTcpOnLo));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 0) << results[0].report;
  std::printf("rank 0: %s\n", results[0].report.c_str());
  EXPECT_THAT(results[0].report, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("peer rank 1"),
                                       Not(HasSubstr("DEADLINE_EXCEEDED"))));
}

TEST(UcxTransportTest, DeadPeerOverSharedMemoryOnlyIsADeadlineNotAHang) {
  // posix/sysv cannot detect peer failure (transport.h): Wait must still return at its limit.
  std::vector<RankResult> results =
      RunWithDyingPeer(WithParams({{"UCX_TLS", "shm"}}), absl::Seconds(2));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 0) << results[0].report;
  std::printf("rank 0: %s\n", results[0].report.c_str());
  EXPECT_THAT(results[0].report, HasSubstr("DEADLINE_EXCEEDED"));
}

TEST(UcxTransportTest, CloseFailsPendingAndLaterRequests) {
  Scenario rank0 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int value = 0;
    ASSIGN_OR_RETURN(auto pending, ep.Irecv(&value, sizeof(value), 1));
    ep.Close();
    absl::Status closed = pending->Wait(kWait);
    if (closed.code() != absl::StatusCode::kUnavailable) {
      return absl::InternalError(
          absl::StrCat("pending: want Unavailable, got ", closed.ToString()));
    }
    absl::StatusOr<std::unique_ptr<Request>> later = ep.Isend(&value, sizeof(value), 2);
    if (later.status().code() != absl::StatusCode::kUnavailable) {
      return absl::InternalError(
          absl::StrCat("later: want Unavailable, got ", later.status().ToString()));
    }
    report += closed.ToString();
    ep.Close();  // idempotent
    return absl::OkStatus();
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int value = 0;
    ASSIGN_OR_RETURN(auto pending, ep.Irecv(&value, sizeof(value), 7));
    report += pending->Wait(absl::Seconds(5)).ToString();  // the peer's close, if UCX tells
    return absl::OkStatus();
  };
  std::vector<RankResult> results =
      RunTwoRanks({WithEnv(kTcpOnLo), WithEnv(kTcpOnLo)}, {rank0, rank1});
  ExpectBothOk(results);
  std::printf("rank 1 after rank 0 closed: %s\n", results[1].report.c_str());
  EXPECT_THAT(results[0].report,
              AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("peer rank 1"), HasSubstr("closed")));
}

TEST(UcxTransportTest, DestroyingAPendingReceiveCancelsIt) {
  // Rank 1 posts a receive for tag 5 and destroys it; the next receive for tag 5 must get the
  // message: the cancelled one neither took it nor wrote its buffer.
  Scenario rank0 = [](Transport&, Endpoint& ep, std::string&) -> absl::Status {
    int go = 0, value = 55;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&go, sizeof(go), 4));
    RETURN_IF_ERROR(r->Wait(kWait));
    ASSIGN_OR_RETURN(auto s, ep.Isend(&value, sizeof(value), 5));
    RETURN_IF_ERROR(s->Wait(kWait));
    ASSIGN_OR_RETURN(auto done, ep.Irecv(&go, sizeof(go), 6));
    return done->Wait(kWait);
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int first = 0, second = 0, go = 1;
    { ASSIGN_OR_RETURN(auto cancelled, ep.Irecv(&first, sizeof(first), 5)); }
    ASSIGN_OR_RETURN(auto real, ep.Irecv(&second, sizeof(second), 5));
    ASSIGN_OR_RETURN(auto s, ep.Isend(&go, sizeof(go), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    RETURN_IF_ERROR(real->Wait(kWait));
    absl::StrAppend(&report, "first ", first, " second ", second);
    ASSIGN_OR_RETURN(auto done, ep.Isend(&go, sizeof(go), 6));
    return done->Wait(kWait);
  };
  std::vector<RankResult> results =
      RunTwoRanks({WithEnv(kTcpOnLo), WithEnv(kTcpOnLo)}, {rank0, rank1});
  ExpectBothOk(results);
  EXPECT_THAT(results[1].report, HasSubstr("first 0 second 55"));
}

TEST(UcxTransportTest, DestroyingAPendingSendReturnsAndReleasesTheBuffer) {
  // Rank 0 destroys a rendezvous send (above kEagerMessageLimit) that rank 1 never receives. UCX
  // 1.13 cannot cancel sends, so the backend closes the endpoint: the destructor returns promptly
  // and the endpoint reports kUnavailable afterwards, on both sides.
  Scenario rank0 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    std::vector<uint8_t> big(2 * kEagerMessageLimit, 1);
    int go = 0;
    ASSIGN_OR_RETURN(auto ready, ep.Irecv(&go, sizeof(go), 4));
    RETURN_IF_ERROR(ready->Wait(kWait));
    absl::Time start = absl::Now();
    { ASSIGN_OR_RETURN(auto unmatched, ep.Isend(big.data(), big.size(), 1000)); }
    absl::StrAppend(&report, "destroyed in ", absl::ToInt64Milliseconds(absl::Now() - start),
                    " ms; after: ", ep.Isend(&go, sizeof(go), 5).status().ToString());
    return absl::OkStatus();
  };
  Scenario rank1 = [](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int go = 1, value = 0;
    ASSIGN_OR_RETURN(auto pending, ep.Irecv(&value, sizeof(value), 5));
    ASSIGN_OR_RETURN(auto s, ep.Isend(&go, sizeof(go), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    absl::StrAppend(&report, pending->Wait(kWait).ToString());
    return absl::OkStatus();
  };
  std::vector<RankResult> results =
      RunTwoRanks({WithEnv(kTcpOnLo), WithEnv(kTcpOnLo)}, {rank0, rank1});
  ExpectBothOk(results);
  std::printf("rank 0: %s\nrank 1: %s\n", results[0].report.c_str(), results[1].report.c_str());
  EXPECT_THAT(results[0].report, HasSubstr("after: UNAVAILABLE"));
  EXPECT_THAT(results[1].report, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("peer rank 0")));
}

// Rank 0 sends a kEagerMessageLimit message and a larger one before rank 1 has posted either
// receive and reports whether each completed within a bound (eager) or not (rendezvous); rank 1
// posts both after rank 0's "go" and checks the data.
std::vector<RankResult> SendBeforeTheReceive(const RankSpec& spec) {
  const size_t small_size = kEagerMessageLimit, big_size = kEagerMessageLimit + 8;
  Scenario rank0 = [&](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    std::vector<uint8_t> small = Pattern(small_size, 1), big = Pattern(big_size, 2);
    ASSIGN_OR_RETURN(auto s1, ep.Isend(small.data(), small.size(), 1));
    ASSIGN_OR_RETURN(auto s2, ep.Isend(big.data(), big.size(), 2));
    const absl::Status small_early = s1->Wait(absl::Seconds(2));
    const absl::Status big_early = s2->Wait(absl::Milliseconds(500));
    absl::StrAppend(&report, "before the receives: small ",
                    absl::StatusCodeToString(small_early.code()), ", big ",
                    absl::StatusCodeToString(big_early.code()));
    int go = 1;
    ASSIGN_OR_RETURN(auto s3, ep.Isend(&go, sizeof(go), 3));
    RETURN_IF_ERROR(s3->Wait(kWait));
    RETURN_IF_ERROR(s1->Wait(kWait));
    RETURN_IF_ERROR(s2->Wait(kWait));
    int ack = 0;
    ASSIGN_OR_RETURN(auto r, ep.Irecv(&ack, sizeof(ack), 4));
    return r->Wait(kWait);
  };
  Scenario rank1 = [&](Transport&, Endpoint& ep, std::string& report) -> absl::Status {
    int go = 0;
    ASSIGN_OR_RETURN(auto r3, ep.Irecv(&go, sizeof(go), 3));
    RETURN_IF_ERROR(r3->Wait(kWait));
    std::vector<uint8_t> small(small_size), big(big_size);
    ASSIGN_OR_RETURN(auto r1, ep.Irecv(small.data(), small.size(), 1));
    ASSIGN_OR_RETURN(auto r2, ep.Irecv(big.data(), big.size(), 2));
    RETURN_IF_ERROR(r1->Wait(kWait));
    RETURN_IF_ERROR(r2->Wait(kWait));
    const bool same = small == Pattern(small_size, 1) && big == Pattern(big_size, 2);
    absl::StrAppend(&report, same ? "data right" : "data differs");
    int ack = 1;
    ASSIGN_OR_RETURN(auto s, ep.Isend(&ack, sizeof(ack), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    ASSIGN_OR_RETURN(std::string description, DescribeEndpoint(ep));
    absl::StrAppend(&report, "\n", description);
    return absl::OkStatus();
  };
  std::vector<RankResult> results = RunTwoRanks({spec, spec}, {rank0, rank1});
  ExpectBothOk(results);
  EXPECT_THAT(results[1].report, HasSubstr("data right"));
  return results;
}

TEST(UcxTransportTest, OverTcpMessagesUpToTheEagerLimitDoNotWaitForTheirReceive) {
  // The default over tcp alone (worker.h): up to kEagerMessageLimit eager, larger by rendezvous.
  std::vector<RankResult> results = SendBeforeTheReceive(WithEnv(kTcpOnLo));
  EXPECT_THAT(results[0].report, HasSubstr("before the receives: small OK, big DEADLINE_EXCEEDED"));
  // UCX's own account of the thresholds: rendezvous from kEagerMessageLimit + 1 bytes.
  EXPECT_THAT(results[1].report,
              ContainsRegex(absl::StrCat("tag_send: 0\\.\\..*\\.\\.", kEagerMessageLimit + 1,
                                         "\\.\\.<rndv>\\.\\.\\(inf\\)")));
}

TEST(UcxTransportTest, EagerLimitOnlyOverTcpAloneAndUnlessSet) {
  // Shared memory, or UCX_RNDV_THRESH set by the user, keeps UCX's own threshold: a 1 MiB message
  // goes by rendezvous and waits for its receive.
  for (const RankSpec& spec :
       {WithParams({{"UCX_TLS", "shm"}}),
        WithParams({{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}, {"UCX_RNDV_THRESH", "auto"}})}) {
    std::vector<RankResult> results = SendBeforeTheReceive(spec);
    EXPECT_THAT(results[0].report,
                HasSubstr("before the receives: small DEADLINE_EXCEEDED, big DEADLINE_EXCEEDED"));
  }
}

TEST(UcxTransportTest, ThreeRanksReceiveOnlyFromTheirPeer) {
  // Ranks 1 and 2 both send tag 3 to rank 0 (rank 2 first, rank 1 after rank 2's arrived); rank
  // 0's receive from rank 1 is posted first and must still get rank 1's value, not rank 2's.
  std::vector<MultiScenario> scenarios(3);
  scenarios[0] = [](Transport&, std::vector<std::unique_ptr<Endpoint>>& eps,
                    std::string& report) -> absl::Status {
    int from1 = 0, from2 = 0, go = 1;
    ASSIGN_OR_RETURN(auto r1, eps[1]->Irecv(&from1, sizeof(from1), 3));
    ASSIGN_OR_RETURN(auto r2, eps[2]->Irecv(&from2, sizeof(from2), 3));
    RETURN_IF_ERROR(r2->Wait(kWait));
    ASSIGN_OR_RETURN(bool early, r1->Test());
    ASSIGN_OR_RETURN(auto s, eps[1]->Isend(&go, sizeof(go), 4));
    RETURN_IF_ERROR(s->Wait(kWait));
    RETURN_IF_ERROR(r1->Wait(kWait));
    absl::StrAppend(&report, "from1 ", from1, " from2 ", from2, " early ", early);
    return absl::OkStatus();
  };
  scenarios[1] = [](Transport&, std::vector<std::unique_ptr<Endpoint>>& eps,
                    std::string&) -> absl::Status {
    int go = 0, value = 111;
    ASSIGN_OR_RETURN(auto r, eps[0]->Irecv(&go, sizeof(go), 4));
    RETURN_IF_ERROR(r->Wait(kWait));
    ASSIGN_OR_RETURN(auto s, eps[0]->Isend(&value, sizeof(value), 3));
    return s->Wait(kWait);
  };
  scenarios[2] = [](Transport&, std::vector<std::unique_ptr<Endpoint>>& eps,
                    std::string&) -> absl::Status {
    int value = 222;
    ASSIGN_OR_RETURN(auto s, eps[0]->Isend(&value, sizeof(value), 3));
    RETURN_IF_ERROR(s->Wait(kWait));
    absl::SleepFor(absl::Milliseconds(300));  // keep the endpoint until rank 0 has finished
    return absl::OkStatus();
  };
  std::vector<RankResult> results =
      RunRanks({WithEnv(kTcpOnLo), WithEnv(kTcpOnLo), WithEnv(kTcpOnLo)}, scenarios);
  ASSERT_EQ(results.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(results[r].exit_code, 0) << r << ": " << results[r].report;
  EXPECT_THAT(results[0].report, HasSubstr("from1 111 from2 222 early 0"));
}

// Runs `body` in a forked child (UCX never runs in the test process); returns its report.
std::string InChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    (void)WriteAll(fds[1], body());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(UcxTransportTest, BadOptionsAndAddressesAreInvalidArgument) {
  std::string report = InChild([] {
    std::string out;
    auto code = [](const absl::Status& s) { return absl::StatusCodeToString(s.code()); };
    TransportOptions options;
    options.world_size = 3;
    options.params = {{"UCX_NO_SUCH_VARIABLE", "1"}};
    out += absl::StrCat("unknown:", code(MakeTransport(options).status()), "\n");
    options.params = {{"TLS", "tcp"}};
    out += absl::StrCat("noprefix:", code(MakeTransport(options).status()), "\n");
    options.params = {};
    options.rank = 3;
    out += absl::StrCat("rank:", code(MakeTransport(options).status()), "\n");
    options.rank = 0;
    absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport(options);
    if (!t.ok()) return absl::StrCat("make failed: ", t.status().ToString());
    const std::string own = (*t)->LocalAddress();
    out += absl::StrCat("prefix:", own.substr(0, 6) == "ucx:0:" ? "yes" : "no", "\n");
    out += absl::StrCat("self:", code((*t)->Connect(0, own).status()), "\n");
    out += absl::StrCat("garbage:", code((*t)->Connect(1, "tcp:1:xyz").status()), "\n");
    out += absl::StrCat("otherrank:", code((*t)->Connect(1, own).status()), "\n");
    // Rank 2's blob made from our own worker address: well formed, so Connect succeeds once.
    std::string as_two = "ucx:2:" + own.substr(6);
    absl::StatusOr<std::unique_ptr<Endpoint>> ep = (*t)->Connect(2, as_two);
    out += absl::StrCat("connect:", code(ep.status()), "\n");
    out += absl::StrCat("again:", code((*t)->Connect(2, as_two).status()), "\n");
    if (ep.ok()) {
      int v = 0;
      out += absl::StrCat("bigtag:", code((*ep)->Isend(&v, 4, kMaxUserTag + 1).status()), "\n");
      out += absl::StrCat("nullbuf:", code((*ep)->Irecv(nullptr, 4, 1).status()), "\n");
    }
    return out;
  });
  EXPECT_THAT(report, HasSubstr("unknown:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("noprefix:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("rank:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("prefix:yes\n"));
  EXPECT_THAT(report, HasSubstr("self:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("garbage:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("otherrank:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("connect:OK\n"));
  EXPECT_THAT(report, HasSubstr("again:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("bigtag:INVALID_ARGUMENT\n"));
  EXPECT_THAT(report, HasSubstr("nullbuf:INVALID_ARGUMENT\n"));
}

// The TCP ports this process listens on: its socket fds (/proc/self/fd) matched by inode against
// the listening sockets of its network namespace (/proc/self/net/tcp, state 0A).
std::vector<int> OwnListeningPorts() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && absl::StartsWith(target, "socket:[")) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  std::vector<int> ports;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.size() < 10 || f[3] != "0A" || !inodes.contains(f[9])) continue;
      ports.push_back(std::stoi(f[1].substr(f[1].find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

TEST(UcxTransportTest, TcpListensOnlyWithinThePortRangeFromParams) {
  // UCX_TCP_PORT_RANGE is a tcp transport option: given as a param it must reach the tcp
  // interface (gravacd --data_port_range relies on it; a NetworkPolicy opens only that range).
  constexpr int kLow = 41000, kHigh = 41063;
  std::string report = InChild([] {
    TransportOptions options;
    options.params = {{"UCX_TLS", "tcp"},
                      {"UCX_NET_DEVICES", "lo"},
                      {"UCX_TCP_PORT_RANGE", absl::StrCat(kLow, "-", kHigh)}};
    absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport(options);
    if (!t.ok()) return absl::StrCat("make failed: ", t.status().ToString());
    return absl::StrJoin(OwnListeningPorts(), ",");
  });
  ASSERT_THAT(report, Not(HasSubstr("failed"))) << report;
  std::vector<std::string> ports = absl::StrSplit(report, ',', absl::SkipEmpty());
  ASSERT_FALSE(ports.empty()) << "the tcp transport listens on no port";
  for (const std::string& port : ports) {
    EXPECT_GE(std::stoi(port), kLow) << report;
    EXPECT_LE(std::stoi(port), kHigh) << report;
  }
}

}  // namespace
}  // namespace gravac::transport::ucx

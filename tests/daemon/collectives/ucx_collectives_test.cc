// The collectives over the real UCX transport. Every rank is a forked process (UCX state is never
// created in the test process, so forks stay clean) that makes its own UCX transport, swaps
// address blobs through a FileRendezvous in a fresh temporary directory, runs the collectives,
// checks every element itself and carries its verdict in its exit code (the failing detail goes
// to stderr and back to the parent through a pipe). The parent bounds every wait: ranks still
// running at the deadline are killed and the test fails.
//
// Cases: every collective (allreduce sum/average of fp32/fp16/bf16 at counts 0, 1, 7, p - 1 and
// 1000003, allgatherv with a different size per rank, broadcast from non-zero roots, barrier) at
// p = 1..4 over tcp on loopback, at p = 2..4 over shared memory only (UCX_TLS=shm), and at
// p = 1..4 with one rank per node of an emulated cluster (needs root, skips otherwise); and a
// rank killed with SIGKILL in the middle of large allreduces, where the survivors must fail with
// an error naming a rank within a bound instead of hanging.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/reduce.h"
#include "daemon/transport/rendezvous.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/ucx/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "netemu/cluster.h"
#include "netemu/netns.h"

namespace gravac::collectives {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using transport::Endpoint;
using transport::FileRendezvous;
using transport::Transport;
using Env = std::vector<std::pair<std::string, std::string>>;

// Bound of the rendezvous and of the exit barrier inside a rank.
constexpr absl::Duration kRankWait = absl::Seconds(20);
const Env kTcpOnLo = {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}};

// A fresh directory per test for the rendezvous files, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string path = (std::filesystem::temp_directory_path() / "gravac-ucxcoll-XXXXXX").string();
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

// How the ranks of one test are started.
struct GroupSpec {
  int world_size = 2;
  std::string dir;                 // fresh: the rendezvous files
  std::vector<std::string> netns;  // per rank; empty = the test's own namespace
  Env env;                         // setenv in the child before the transport is made
  Env params;                      // TransportOptions::params
  absl::Duration transport_timeout = absl::Seconds(20);
  CommunicatorOptions comm = {
      .chunk_bytes = 64 << 10, .max_inflight_chunks = 4, .op_timeout = absl::Seconds(20)};
  // After the body, wait until every rank's body is done before tearing down, so no rank closes
  // its endpoints while a peer may still be receiving.
  bool exit_barrier = true;
};

// What a rank's body gets.
struct RankContext {
  int rank;
  int world_size;
  Communicator& comm;
  const std::string& dir;
  int progress_fd;      // the body may write one byte per unit of progress (the kill test)
  std::string& report;  // text back to the parent
};
using RankBody = std::function<absl::Status(RankContext&)>;

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n <= 0) return absl::InternalError("write to pipe failed");
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

// The whole life of rank `rank` in its process.
absl::Status RankMain(int rank, const GroupSpec& spec, const RankBody& body, int progress_fd,
                      std::string& report) {
  if (!spec.netns.empty()) RETURN_IF_ERROR(netemu::EnterNetns(spec.netns[rank]));
  for (const auto& [key, value] : spec.env) setenv(key.c_str(), value.c_str(), 1);
  const int p = spec.world_size;
  transport::TransportOptions options;
  options.rank = rank;
  options.world_size = p;
  options.op_timeout = spec.transport_timeout;
  options.params = spec.params;
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, transport::ucx::MakeTransport(options));
  FileRendezvous rendezvous(spec.dir + "/addresses", rank, p, kRankWait);
  ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                   rendezvous.Exchange(transport->LocalAddress()));
  std::vector<std::unique_ptr<Endpoint>> peers(p);
  for (int q = 0; q < p; ++q) {
    if (q == rank) continue;
    ASSIGN_OR_RETURN(peers[q], transport->Connect(q, addresses[q]));
  }
  Endpoint* right = peers[(rank + 1) % p].get();  // null when p == 1
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Communicator::Create(rank, std::move(peers), spec.comm, transport.get()));
  RankContext context{rank, p, *comm, spec.dir, progress_fd, report};
  absl::Status status = body(context);
  if (status.ok() && comm->abort_status().ok() && right != nullptr) {
    // What UCX chose, once the collectives have surely completed the wire-up.
    absl::StatusOr<std::string> description = transport::ucx::DescribeEndpoint(*right);
    absl::StrAppend(&report, "\nendpoint to the right: ",
                    description.ok() ? *description : description.status().ToString());
  }
  if (spec.exit_barrier) {
    FileRendezvous done(spec.dir + "/done", rank, p, kRankWait);
    if (!status.ok()) {
      (void)done.Publish("failed");  // the others need not wait for this rank
    } else {
      absl::Status all_done = done.Exchange("ok").status();
      if (!all_done.ok()) {
        status = absl::Status(all_done.code(), absl::StrCat("exit barrier: ", all_done.message()));
      }
    }
  }
  comm.reset();
  transport.reset();
  return status;
}

struct RankResult {
  std::string report;
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;  // still running at the deadline, killed by the parent
  absl::Time ended;        // when its result pipe closed (it exited)
};

// One forked process per rank. The destructor kills and reaps whatever still runs, so a failed
// assertion never leaks processes.
class Ranks {
 public:
  Ranks(const GroupSpec& spec, const RankBody& body) {
    int progress[2];
    if (pipe(progress) != 0) return;
    progress_read_ = progress[0];
    fcntl(progress_read_, F_SETFL, O_NONBLOCK);
    for (int r = 0; r < spec.world_size; ++r) {
      int result[2];
      if (pipe(result) != 0) break;
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid == 0) {
        close(result[0]);
        std::string report;
        absl::Status s = RankMain(r, spec, body, progress[1], report);
        if (!s.ok()) {
          report = absl::StrCat("rank ", r, " FAILED: ", s.ToString(), "\n", report);
          std::fprintf(stderr, "%s\n", report.c_str());
        }
        (void)WriteAll(result[1], report);
        _exit(s.ok() ? 0 : 1);
      }
      close(result[1]);
      if (pid < 0) {
        close(result[0]);
        break;
      }
      pids_.push_back(pid);
      result_fds_.push_back(result[0]);
    }
    close(progress[1]);
    progress_count_.assign(pids_.size(), 0);
  }

  ~Ranks() {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] > 0) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], nullptr, 0);
      }
      if (result_fds_[r] >= 0) close(result_fds_[r]);
    }
    if (progress_read_ >= 0) close(progress_read_);
  }

  int started() const { return static_cast<int>(pids_.size()); }

  // Reads progress bytes until every rank sent at least `count`; false at the deadline.
  bool WaitForProgress(int count, absl::Time deadline) {
    while (*std::min_element(progress_count_.begin(), progress_count_.end()) < count) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms <= 0) return false;
      pollfd pfd = {progress_read_, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) continue;
      uint8_t buf[256];
      const ssize_t n = read(progress_read_, buf, sizeof(buf));
      if (n == 0) return false;  // every rank exited
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] < progress_count_.size()) ++progress_count_[buf[i]];
      }
    }
    return true;
  }

  void Kill(int rank) { kill(pids_[rank], SIGKILL); }

  // Collects every rank's report until all have exited or `deadline`; kills the rest then.
  std::vector<RankResult> Finish(absl::Time deadline) {
    const size_t p = pids_.size();
    std::vector<RankResult> results(p);
    std::vector<bool> open(p, true);
    while (std::count(open.begin(), open.end(), true) > 0) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms <= 0) break;
      std::vector<pollfd> fds;
      std::vector<size_t> who;
      for (size_t r = 0; r < p; ++r) {
        if (!open[r]) continue;
        fds.push_back({result_fds_[r], POLLIN, 0});
        who.push_back(r);
      }
      if (poll(fds.data(), fds.size(), static_cast<int>(left_ms)) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const size_t r = who[i];
        char buf[4096];
        const ssize_t n = read(result_fds_[r], buf, sizeof(buf));
        if (n > 0) {
          results[r].report.append(buf, n);
        } else {
          open[r] = false;
          results[r].ended = absl::Now();
        }
      }
    }
    for (size_t r = 0; r < p; ++r) {
      if (open[r]) {
        results[r].timed_out = true;
        results[r].ended = absl::Now();
        kill(pids_[r], SIGKILL);
      }
      int status = 0;
      waitpid(pids_[r], &status, 0);
      pids_[r] = -1;
      if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) results[r].term_signal = WTERMSIG(status);
    }
    return results;
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> result_fds_;
  int progress_read_ = -1;
  std::vector<int> progress_count_;
};

void ExpectAllPassed(const std::vector<RankResult>& results, int world_size) {
  ASSERT_EQ(static_cast<int>(results.size()), world_size) << "could not fork every rank";
  for (int r = 0; r < world_size; ++r) {
    EXPECT_FALSE(results[r].timed_out) << "rank " << r << " still ran at the deadline (killed)";
    EXPECT_EQ(results[r].exit_code, 0)
        << "rank " << r << " (signal " << results[r].term_signal << "): " << results[r].report;
  }
}

// ---- Inputs and checks. Small integers: every partial sum over <= 4 ranks is exact in fp32,
// fp16 and bf16, so the expected values are exact too.

int InputValue(int rank, size_t i) { return static_cast<int>((i * 7 + rank * 3) % 11) - 5; }

void Store(DataType type, uint8_t* at, float v) {
  if (type == DataType::kFloat32) {
    std::memcpy(at, &v, 4);
    return;
  }
  const uint16_t h = type == DataType::kFloat16 ? FloatToHalf(v) : FloatToBFloat16(v);
  std::memcpy(at, &h, 2);
}
float Load(DataType type, const uint8_t* at) {
  if (type == DataType::kFloat32) {
    float v;
    std::memcpy(&v, at, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, at, 2);
  return type == DataType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

// The exact sum, or the sum divided once by p in fp32 and rounded once to `type`.
float Expected(DataType type, ReduceOp op, int p, size_t i) {
  int sum = 0;
  for (int r = 0; r < p; ++r) sum += InputValue(r, i);
  float want = static_cast<float>(sum);
  if (op == ReduceOp::kAverage) want /= static_cast<float>(p);
  uint8_t rounded[4];
  Store(type, rounded, want);
  return Load(type, rounded);
}

absl::Status CheckedAllreduce(RankContext& c, DataType type, ReduceOp op, size_t count,
                              bool in_place) {
  const size_t elem = DataTypeSize(type);
  std::vector<uint8_t> in(count * elem);
  for (size_t i = 0; i < count; ++i) {
    Store(type, in.data() + i * elem, static_cast<float>(InputValue(c.rank, i)));
  }
  const std::vector<uint8_t> original = in;
  std::vector<uint8_t> out = in_place ? std::vector<uint8_t>() : std::vector<uint8_t>(in.size());
  std::vector<uint8_t>& result = in_place ? in : out;
  const std::string what =
      absl::StrFormat("rank %d: allreduce %s %s of %d elements %s", c.rank, ReduceOpName(op),
                      DataTypeName(type), count, in_place ? "in place" : "out of place");
  absl::Status s = c.comm.Allreduce(in.data(), result.data(), count, type, op);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  if (!in_place && in != original) return absl::DataLossError(what + ": the input was written");
  for (size_t i = 0; i < count; ++i) {
    const float got = Load(type, result.data() + i * elem);
    const float want = Expected(type, op, c.world_size, i);
    if (got != want) {
      return absl::DataLossError(
          absl::StrFormat("%s: element %d is %g, want %g", what, i, got, want));
    }
  }
  return absl::OkStatus();
}

uint8_t PatternByte(int rank, size_t i) { return static_cast<uint8_t>(i * 13 + rank * 71 + 5); }

// Different sizes per rank, including an empty block and blocks of several chunks.
std::vector<size_t> BlockSizes(int p) {
  const size_t sizes[] = {100003, 0, 1, 300007};
  return std::vector<size_t>(sizes, sizes + p);
}

absl::Status CheckGathered(const RankContext& c, const char* what, const uint8_t* recv,
                           const std::vector<size_t>& sizes) {
  size_t offset = 0;
  for (int q = 0; q < c.world_size; ++q) {
    for (size_t i = 0; i < sizes[q]; ++i) {
      if (recv[offset + i] != PatternByte(q, i)) {
        return absl::DataLossError(absl::StrFormat("rank %d: %s: byte %d of rank %d's block is %d",
                                                   c.rank, what, i, q, recv[offset + i]));
      }
    }
    offset += sizes[q];
  }
  return absl::OkStatus();
}

absl::Status CheckedAllgatherv(RankContext& c) {
  const std::vector<size_t> sizes = BlockSizes(c.world_size);
  std::vector<uint8_t> mine(sizes[c.rank]);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = PatternByte(c.rank, i);
  size_t total = 0;
  for (size_t s : sizes) total += s;
  std::vector<uint8_t> recv(total, 0xee);
  RETURN_IF_ERROR(c.comm.Allgatherv(mine.data(), recv.data(), sizes));
  RETURN_IF_ERROR(CheckGathered(c, "allgatherv", recv.data(), sizes));

  // The same blocks when the ranks do not know each other's sizes.
  std::vector<uint8_t> any;
  std::vector<size_t> any_sizes;
  RETURN_IF_ERROR(c.comm.AllgathervAnySize(mine, &any, &any_sizes));
  if (any_sizes != sizes || any.size() != total) {
    return absl::DataLossError(
        absl::StrFormat("rank %d: allgatherv any size: %d bytes in total", c.rank, any.size()));
  }
  return CheckGathered(c, "allgatherv any size", any.data(), sizes);
}

absl::Status CheckedBroadcast(RankContext& c, int root, size_t bytes) {
  std::vector<uint8_t> data(bytes, 0xee);
  if (c.rank == root) {
    for (size_t i = 0; i < bytes; ++i) data[i] = PatternByte(root, i);
  }
  RETURN_IF_ERROR(c.comm.Broadcast(data.data(), bytes, root));
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != PatternByte(root, i)) {
      return absl::DataLossError(
          absl::StrFormat("rank %d: broadcast of %d bytes from root %d: byte %d is %d", c.rank,
                          bytes, root, i, data[i]));
    }
  }
  return absl::OkStatus();
}

// Each rank leaves a file before entering the barrier; after it, every rank's file must exist.
// One rank per round is late, so a barrier that does not wait is caught.
absl::Status CheckedBarriers(RankContext& c) {
  for (int round = 0; round < 3; ++round) {
    if (c.rank == round % c.world_size) absl::SleepFor(absl::Milliseconds(50));
    const auto marker = [&](int r) { return absl::StrCat(c.dir, "/barrier-", round, "-", r); };
    std::FILE* f = std::fopen(marker(c.rank).c_str(), "w");
    if (f == nullptr) return absl::InternalError("cannot write " + marker(c.rank));
    std::fclose(f);
    RETURN_IF_ERROR(c.comm.Barrier());
    for (int r = 0; r < c.world_size; ++r) {
      if (!std::filesystem::exists(marker(r))) {
        return absl::InternalError(absl::StrFormat(
            "rank %d: barrier round %d returned before rank %d entered it", c.rank, round, r));
      }
    }
  }
  return absl::OkStatus();
}

// ---- Every collective at p = 1..4 over tcp on loopback, shared memory and two or more network
// namespaces. One forked run per (fabric, p) runs the whole list, so UCX and the cluster are set
// up once per case.

// {0, 1, 7, p - 1, 1000003} without repeats: empty, one element, fewer elements than ranks (some
// ring segments empty), not divisible by p, and several chunks per segment.
std::vector<size_t> Counts(int p) {
  std::vector<size_t> counts = {0, 1, 7, static_cast<size_t>(p - 1), 1000003};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

absl::Status EveryCollective(RankContext& c) {
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (size_t count : Counts(c.world_size)) {
        RETURN_IF_ERROR(CheckedAllreduce(c, type, op, count, /*in_place=*/true));
        if (type == DataType::kFloat32 && op == ReduceOp::kSum) {
          RETURN_IF_ERROR(CheckedAllreduce(c, type, op, count, /*in_place=*/false));
        }
      }
    }
  }
  RETURN_IF_ERROR(CheckedAllgatherv(c));
  const int last = c.world_size - 1, second = std::min(1, last);
  RETURN_IF_ERROR(CheckedBroadcast(c, /*root=*/last, 200003));
  RETURN_IF_ERROR(CheckedBroadcast(c, /*root=*/second, 5));
  RETURN_IF_ERROR(CheckedBroadcast(c, /*root=*/second, 0));
  return CheckedBarriers(c);
}

// Runs EveryCollective on p forked ranks and checks every rank passed; returns the results for
// the fabric checks (empty when some rank could not be started).
std::vector<RankResult> RunEveryCollective(GroupSpec spec, absl::Duration bound) {
  TempDir dir;
  EXPECT_FALSE(dir.path().empty());
  if (dir.path().empty()) return {};
  spec.dir = dir.path();
  const absl::Time start = absl::Now();
  Ranks ranks(spec, EveryCollective);
  EXPECT_EQ(ranks.started(), spec.world_size);
  std::vector<RankResult> results = ranks.Finish(start + bound);
  ExpectAllPassed(results, spec.world_size);
  std::printf("p=%d: %lld ms\n", spec.world_size,
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)));
  return results;
}

std::string PName(const ::testing::TestParamInfo<int>& info) {
  return absl::StrCat("p", info.param);
}

class UcxTcpLoopbackTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxTcpLoopbackTest, EveryCollectiveExactOnEveryRank) {
  GroupSpec spec;
  spec.world_size = GetParam();
  spec.params = kTcpOnLo;
  std::vector<RankResult> results = RunEveryCollective(spec, absl::Seconds(60));
  for (int r = 0; r < static_cast<int>(results.size()) && spec.world_size > 1; ++r) {
    if (results[r].exit_code != 0) continue;  // already reported
    EXPECT_THAT(results[r].report, AllOf(HasSubstr("tcp/lo"), Not(HasSubstr("posix")),
                                         Not(HasSubstr("sysv")), Not(HasSubstr("cma"))))
        << "rank " << r << " did not run over tcp only";
  }
}

INSTANTIATE_TEST_SUITE_P(Tcp, UcxTcpLoopbackTest, ::testing::Values(1, 2, 3, 4), PName);

// Shared memory only (posix/sysv; no failure detection there, see ucx/transport.h).
class UcxShmTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxShmTest, EveryCollectiveExactOnEveryRank) {
  GroupSpec spec;
  spec.world_size = GetParam();
  spec.params = {{"UCX_TLS", "shm"}};
  std::vector<RankResult> results = RunEveryCollective(spec, absl::Seconds(60));
  for (int r = 0; r < static_cast<int>(results.size()); ++r) {
    if (results[r].exit_code != 0) continue;  // already reported
    EXPECT_THAT(results[r].report, AllOf(ContainsRegex("posix|sysv"), Not(HasSubstr("tcp"))))
        << "rank " << r << " did not run over shared memory only";
  }
}

INSTANTIATE_TEST_SUITE_P(Shm, UcxShmTest, ::testing::Values(2, 3, 4), PName);

// One node of an emulated cluster per rank (10 Gbit/s links, so the links cost little time):
// every collective crosses the veth links and the bridge.
class UcxNetnsTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxNetnsTest, EveryCollectiveBetweenNodes) {
  const int p = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root (run as root to cover this)";
  absl::StatusOr<std::unique_ptr<netemu::Cluster>> cluster =
      netemu::Cluster::Create(p, {.rate_bits_per_s = 10e9}, "gvccoll");
  if (!cluster.ok()) {
    GTEST_SKIP() << "network namespaces unavailable here (no emulated cluster): "
                 << cluster.status();
  }
  GroupSpec spec;
  spec.world_size = p;
  for (int r = 0; r < p; ++r) spec.netns.push_back((*cluster)->node_namespace(r));
  spec.env = {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "eth0"}};
  std::vector<RankResult> results = RunEveryCollective(spec, absl::Seconds(60));
  for (int r = 0; r < static_cast<int>(results.size()) && p > 1; ++r) {
    if (results[r].exit_code != 0) continue;  // already reported
    EXPECT_THAT(results[r].report, AllOf(HasSubstr("tcp/eth0"), Not(HasSubstr("tcp/lo"))))
        << "rank " << r << " did not cross the emulated link";
  }
}

INSTANTIATE_TEST_SUITE_P(Netns, UcxNetnsTest, ::testing::Values(1, 2, 3, 4), PName);

// ---- A rank killed with SIGKILL in the middle of large allreduces.

constexpr size_t kLargeCount = size_t{16} << 20;  // 64 MiB of fp32 per rank
constexpr absl::Duration kOpTimeout = absl::Seconds(2);
constexpr absl::Duration kErrorBound = absl::Seconds(10);

// Allreduces until one fails (reported with the wall-clock time it returned) or 30 s pass.
absl::Status AllreduceUntilError(RankContext& c) {
  std::vector<float> data(kLargeCount, static_cast<float>(c.rank + 1));
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (int iteration = 0; absl::Now() < give_up; ++iteration) {
    absl::Status s = c.comm.Allreduce(data.data(), data.data(), kLargeCount, DataType::kFloat32,
                                      ReduceOp::kAverage);
    if (!s.ok()) {
      const int64_t at_ms = absl::ToUnixMillis(absl::Now());
      absl::Status later = c.comm.Barrier();
      absl::StrAppend(&c.report, "error_at_ms=", at_ms, " iteration=", iteration,
                      " error: ", s.ToString(), "\nlater call: ", later.ToString());
      if (!absl::IsFailedPrecondition(later)) {
        return absl::InternalError(absl::StrCat(
            "rank ", c.rank, ": after the error, a barrier returned ", later.ToString()));
      }
      return absl::OkStatus();
    }
    const char rank_byte = static_cast<char>(c.rank);
    RETURN_IF_ERROR(WriteAll(c.progress_fd, std::string_view(&rank_byte, 1)));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", c.rank, ": no error within 30 s although a peer was killed"));
}

// Over tcp the survivors see the death (kUnavailable); over shared memory only, UCX cannot
// (ucx/transport.h), so they see silence (kDeadlineExceeded after op_timeout). Either way every
// survivor must return an error naming a rank, and then exit: tearing down endpoints with sends
// still in flight to the dead rank must neither hang nor trip a UCX assertion.
class UcxPeerFailureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UcxPeerFailureTest, KilledRankFailsTheSurvivorsWithinTheBound) {
  constexpr int kP = 3, kVictim = 1;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  GroupSpec spec;
  spec.world_size = kP;
  spec.dir = dir.path();
  spec.params = GetParam() == "tcp" ? kTcpOnLo : Env{{"UCX_TLS", "shm"}};
  spec.transport_timeout = kOpTimeout;
  spec.comm = {.chunk_bytes = 1 << 20, .max_inflight_chunks = 4, .op_timeout = kOpTimeout};
  spec.exit_barrier = false;  // the victim never arrives
  Ranks ranks(spec, AllreduceUntilError);
  ASSERT_EQ(ranks.started(), kP);
  // Every rank has finished two large allreduces and is inside the next one.
  ASSERT_TRUE(ranks.WaitForProgress(2, absl::Now() + absl::Seconds(20)))
      << "the ranks did not complete two allreduces within 20 s";
  ranks.Kill(kVictim);
  const absl::Time killed = absl::Now();
  std::vector<RankResult> results = ranks.Finish(killed + kErrorBound + absl::Seconds(5));
  ASSERT_EQ(results.size(), size_t{kP});
  EXPECT_EQ(results[kVictim].term_signal, SIGKILL);
  int named_the_victim = 0;
  for (int r = 0; r < kP; ++r) {
    if (r == kVictim) continue;
    const RankResult& result = results[r];
    std::printf("rank %d (exited %lld ms after the kill): %s\n", r,
                static_cast<long long>(absl::ToInt64Milliseconds(result.ended - killed)),
                result.report.c_str());
    EXPECT_FALSE(result.timed_out) << "rank " << r << " hung after the kill: " << result.report;
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << result.report;
    const size_t at = result.report.find("error_at_ms=");
    ASSERT_NE(at, std::string::npos) << "rank " << r << ": " << result.report;
    int64_t error_ms = 0;
    ASSERT_TRUE(absl::SimpleAtoi(
        result.report.substr(at + 12, result.report.find(' ', at) - at - 12), &error_ms));
    EXPECT_LE(absl::FromUnixMillis(error_ms) - killed, kErrorBound)
        << "rank " << r << " failed too late: " << result.report;
    EXPECT_THAT(result.report,
                ContainsRegex("error: [A-Z_]+: rank [0-9]+: allreduce: .*peer rank [0-9]"))
        << "rank " << r << ": the error does not name the ranks";
    if (result.report.find(absl::StrCat("peer rank ", kVictim)) != std::string::npos) {
      ++named_the_victim;
    }
  }
  EXPECT_GE(named_the_victim, 1) << "no survivor's error names the killed rank " << kVictim;
}

INSTANTIATE_TEST_SUITE_P(Fabric, UcxPeerFailureTest, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace gravac::collectives

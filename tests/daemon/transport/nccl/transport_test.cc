// NCCL transport tests. Every rank is a forked process with its own CUDA device (NCCL refuses two
// ranks of a communicator on one device); CUDA is never initialised in the test process itself,
// so the forks stay clean: even the device count is asked in a forked probe. Ranks swap their
// LocalAddress() blobs through a FileRendezvous in a fresh directory, check their own results on
// the host and carry the verdict in their exit code (details through a pipe). Tests that need
// devices skip when cudaGetDeviceCount fails or finds fewer than two.
#include "daemon/transport/nccl/transport.h"

#include <cuda_runtime_api.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/transport/nccl/nccl_status.h"
#include "daemon/transport/rendezvous.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/cuda/cuda_status.h"

namespace gravac::transport::nccl {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

// Runs `fn` in a forked child; returns its exit code (-1 when it did not exit normally or did not
// finish within `bound`, after which it is killed) and what it wrote to the pipe it was given.
struct ChildResult {
  int exit_code = -1;
  std::string output;
};
ChildResult RunChild(const std::function<int(int fd)>& fn, absl::Duration bound) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    _exit(fn(fds[1]));
  }
  close(fds[1]);
  ChildResult result;
  const absl::Time deadline = absl::Now() + bound;
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    pollfd pfd = {fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    result.output.append(buf, n);
  }
  close(fds[0]);
  if (absl::Now() >= deadline) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

void WriteString(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += n;
  }
}

// The number of CUDA devices, asked in a forked child; -1 when cudaGetDeviceCount fails.
int DeviceCount() {
  ChildResult probe = RunChild(
      [](int fd) {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess) count = -1;
        WriteString(fd, std::to_string(count));
        return 0;
      },
      absl::Seconds(60));
  int count = -1;
  if (probe.exit_code != 0 || !absl::SimpleAtoi(probe.output, &count)) return -1;
  return count;
}

#define SKIP_WITHOUT_TWO_DEVICES()                                                           \
  do {                                                                                       \
    const int devices = DeviceCount();                                                       \
    if (devices <= 0) GTEST_SKIP() << "GPU test skipped: no CUDA device";                    \
    if (devices < 2) {                                                                       \
      GTEST_SKIP() << "GPU test skipped: NCCL needs one device per rank; found " << devices; \
    }                                                                                        \
  } while (false)

// A device buffer owned by a rank's body.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  ~DeviceBytes() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  absl::Status Allocate(size_t size) {
    size_ = size;
    if (size == 0) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr_, size));
    return absl::OkStatus();
  }
  absl::Status Upload(const std::vector<uint8_t>& host) {
    if (host.empty()) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(ptr_, host.data(), host.size(), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint8_t>> Download(size_t size) const {
    std::vector<uint8_t> host(size);
    if (size == 0) return host;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpy(host.data(), ptr_, size, cudaMemcpyDeviceToHost));
    return host;
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

std::vector<uint8_t> Pattern(int seed, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 31 + seed * 7 + 1);
  return bytes;
}

// A rank's part of a two-rank test.
using Body = std::function<absl::Status(int rank, Transport&, Endpoint& peer)>;

absl::Status RankMain(int rank, const std::string& dir, const Body& body) {
  TransportOptions options;
  options.rank = rank;
  options.world_size = 2;
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, MakeTransport(options));
  FileRendezvous rendezvous(dir + "/addresses", rank, 2, kWait);
  ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                   rendezvous.Exchange(transport->LocalAddress()));
  ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> peer,
                   transport->Connect(1 - rank, addresses[1 - rank]));
  absl::Status status = body(rank, *transport, *peer);
  // Nobody closes while the other may still be receiving.
  FileRendezvous done(dir + "/done", rank, 2, kWait);
  if (status.ok()) {
    absl::Status all_done = done.Exchange("ok").status();
    if (!all_done.ok()) status = all_done;
  } else {
    (void)done.Publish("failed");
  }
  return status;
}

// Forks both ranks and expects both to pass.
void RunTwoRanks(const Body& body) {
  std::string dir = (std::filesystem::temp_directory_path() / "gravac-nccl-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int rank = 0; rank < 2; ++rank) {
    int fd[2];
    ASSERT_EQ(pipe(fd), 0);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      absl::Status s = RankMain(rank, dir, body);
      if (!s.ok()) WriteString(fd[1], absl::StrCat("rank ", rank, " FAILED: ", s.ToString()));
      _exit(s.ok() ? 0 : 1);
    }
    close(fd[1]);
    pids.push_back(pid);
    fds.push_back(fd[0]);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  for (int rank = 0; rank < 2; ++rank) {
    std::string report;
    for (;;) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms <= 0) break;
      pollfd pfd = {fds[rank], POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[rank], buf, sizeof(buf));
      if (n <= 0) break;
      report.append(buf, n);
    }
    close(fds[rank]);
    const bool late = absl::Now() >= deadline;
    if (late) kill(pids[rank], SIGKILL);
    int status = 0;
    waitpid(pids[rank], &status, 0);
    EXPECT_FALSE(late) << "rank " << rank << " still ran after 120 s (killed)";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << rank << ": " << report;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

absl::Status ExpectBytes(const DeviceBytes& buffer, const std::vector<uint8_t>& want,
                         const char* what) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> got, buffer.Download(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::DataLossError(
          absl::StrFormat("%s: byte %d is %d, want %d", what, i, got[i], want[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status WaitAll(std::vector<std::unique_ptr<Request>>& requests) {
  for (auto& request : requests) RETURN_IF_ERROR(request->Wait(kWait));
  return absl::OkStatus();
}

// ---- Without a device.

TEST(NcclTransportTest, ParametersAreCheckedBeforeAnyCudaCall) {
  TransportOptions options;
  options.world_size = 2;
  options.params = {{"UCX_TLS", "tcp"}};
  EXPECT_THAT(MakeTransport(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("unknown parameter 'UCX_TLS'")));
  options.params = {{"device", "first"}};
  EXPECT_THAT(MakeTransport(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device=first")));
  options.params = {};
  options.rank = 2;
  EXPECT_THAT(MakeTransport(options), StatusIs(absl::StatusCode::kInvalidArgument));
}

absl::Status FailingNcclCall(ncclResult_t result) {
  GRAVAC_NCCL_RETURN_IF_ERROR(result, nullptr);
  return absl::OkStatus();
}

TEST(NcclStatusTest, KeepsTheCallTextTheErrorAndFileLine) {
  EXPECT_TRUE(FailingNcclCall(ncclSuccess).ok());
  EXPECT_THAT(
      FailingNcclCall(ncclInvalidUsage),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::AllOf(HasSubstr("result failed: "), HasSubstr("transport_test.cc:"),
                                HasSubstr(ncclGetErrorString(ncclInvalidUsage)))));
  EXPECT_THAT(FailingNcclCall(ncclRemoteError), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(FailingNcclCall(ncclSystemError), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(FailingNcclCall(ncclUnhandledCudaError), StatusIs(absl::StatusCode::kInternal));
}

TEST(NcclTransportTest, IsRegisteredAsNccl) {
  bool listed = false;
  for (const TransportBackend& backend : TransportBackends()) listed |= backend.name == "nccl";
  EXPECT_TRUE(listed);
  TransportOptions options;
  options.params = {{"bogus", "1"}};
  EXPECT_THAT(transport::MakeTransport("nccl", options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nccl transport: rank 0: unknown parameter 'bogus'")));
}

TEST(NcclTransportTest, NoVisibleDeviceIsAFailedPrecondition) {
  ChildResult child = RunChild(
      [](int fd) {
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        TransportOptions options;
        absl::StatusOr<std::unique_ptr<Transport>> transport = MakeTransport(options);
        WriteString(fd, transport.status().ToString());
        return absl::IsFailedPrecondition(transport.status()) ? 0 : 1;
      },
      absl::Seconds(60));
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_THAT(child.output, HasSubstr("no CUDA device"));
}

// ---- Two ranks, one device each.

// Messages of 0, 1 and 1 MiB + 3 bytes into larger buffers, an echo back, and a too small
// receive that fails without disturbing the next message.
TEST(NcclTransportTest, RoundTripBetweenTwoProcesses) {
  SKIP_WITHOUT_TWO_DEVICES();
  constexpr size_t kBig = (size_t{1} << 20) + 3;
  RunTwoRanks([](int rank, Transport&, Endpoint& peer) -> absl::Status {
    DeviceBytes big, one, echo, small, after;
    RETURN_IF_ERROR(big.Allocate(2 * kBig));
    RETURN_IF_ERROR(one.Allocate(16));
    RETURN_IF_ERROR(echo.Allocate(kBig));
    RETURN_IF_ERROR(small.Allocate(100));
    RETURN_IF_ERROR(after.Allocate(50));
    std::vector<std::unique_ptr<Request>> requests;
    if (rank == 0) {
      RETURN_IF_ERROR(big.Upload(Pattern(1, kBig)));
      RETURN_IF_ERROR(one.Upload(Pattern(2, 1)));
      RETURN_IF_ERROR(small.Upload(Pattern(3, 100)));
      RETURN_IF_ERROR(after.Upload(Pattern(4, 50)));
      ASSIGN_OR_RETURN(auto echoed, peer.Irecv(echo.get(), kBig, 10));
      ASSIGN_OR_RETURN(auto r1, peer.Isend(big.get(), kBig, 7));
      ASSIGN_OR_RETURN(auto r2, peer.Isend(nullptr, 0, 8));
      ASSIGN_OR_RETURN(auto r3, peer.Isend(one.get(), 1, 9));
      ASSIGN_OR_RETURN(auto r4, peer.Isend(small.get(), 100, 11));
      ASSIGN_OR_RETURN(auto r5, peer.Isend(after.get(), 50, 12));
      requests.push_back(std::move(r1));
      requests.push_back(std::move(r2));
      requests.push_back(std::move(r3));
      requests.push_back(std::move(r4));
      requests.push_back(std::move(r5));
      RETURN_IF_ERROR(WaitAll(requests));
      RETURN_IF_ERROR(echoed->Wait(kWait));
      if (echoed->bytes() != kBig) return absl::DataLossError("echo size");
      return ExpectBytes(echo, Pattern(1, kBig), "echo");
    }
    ASSIGN_OR_RETURN(auto got_big, peer.Irecv(big.get(), 2 * kBig, 7));
    ASSIGN_OR_RETURN(auto got_empty, peer.Irecv(nullptr, 0, 8));
    ASSIGN_OR_RETURN(auto got_one, peer.Irecv(one.get(), 16, 9));
    ASSIGN_OR_RETURN(auto too_small, peer.Irecv(small.get(), 10, 11));
    ASSIGN_OR_RETURN(auto got_after, peer.Irecv(after.get(), 50, 12));
    RETURN_IF_ERROR(got_big->Wait(kWait));
    RETURN_IF_ERROR(got_empty->Wait(kWait));
    RETURN_IF_ERROR(got_one->Wait(kWait));
    if (got_big->bytes() != kBig || got_empty->bytes() != 0 || got_one->bytes() != 1) {
      return absl::DataLossError(absl::StrFormat("sizes %d %d %d", got_big->bytes(),
                                                 got_empty->bytes(), got_one->bytes()));
    }
    RETURN_IF_ERROR(ExpectBytes(big, Pattern(1, kBig), "1 MiB + 3"));
    RETURN_IF_ERROR(ExpectBytes(one, Pattern(2, 1), "1 byte"));
    absl::Status truncated = too_small->Wait(kWait);
    if (!absl::IsInvalidArgument(truncated) ||
        truncated.message().find("larger than the 10-byte receive buffer") == std::string::npos) {
      return absl::InternalError(absl::StrCat("too small receive: ", truncated.ToString()));
    }
    RETURN_IF_ERROR(got_after->Wait(kWait));
    RETURN_IF_ERROR(ExpectBytes(after, Pattern(4, 50), "message after the truncated one"));
    ASSIGN_OR_RETURN(auto echo_back, peer.Isend(big.get(), kBig, 10));
    return echo_back->Wait(kWait);
  });
}

// NCCL matches in posting order: receives posted in another order than the sends fail with both
// tags named, and the pair keeps working afterwards.
TEST(NcclTransportTest, OutOfOrderTagsAreRejected) {
  SKIP_WITHOUT_TWO_DEVICES();
  RunTwoRanks([](int rank, Transport&, Endpoint& peer) -> absl::Status {
    DeviceBytes a, b, c;
    RETURN_IF_ERROR(a.Allocate(64));
    RETURN_IF_ERROR(b.Allocate(64));
    RETURN_IF_ERROR(c.Allocate(64));
    if (rank == 0) {
      RETURN_IF_ERROR(a.Upload(Pattern(1, 64)));
      RETURN_IF_ERROR(b.Upload(Pattern(2, 64)));
      RETURN_IF_ERROR(c.Upload(Pattern(3, 64)));
      std::vector<std::unique_ptr<Request>> sends;
      ASSIGN_OR_RETURN(auto s1, peer.Isend(a.get(), 64, 1));
      ASSIGN_OR_RETURN(auto s2, peer.Isend(b.get(), 64, 2));
      ASSIGN_OR_RETURN(auto s3, peer.Isend(c.get(), 64, 3));
      sends.push_back(std::move(s1));
      sends.push_back(std::move(s2));
      sends.push_back(std::move(s3));
      return WaitAll(sends);
    }
    ASSIGN_OR_RETURN(auto want2, peer.Irecv(b.get(), 64, 2));
    ASSIGN_OR_RETURN(auto want1, peer.Irecv(a.get(), 64, 1));
    ASSIGN_OR_RETURN(auto want3, peer.Irecv(c.get(), 64, 3));
    absl::Status first = want2->Wait(kWait);
    absl::Status second = want1->Wait(kWait);
    if (!absl::IsInvalidArgument(first) ||
        first.message().find("posted with tag 2 met a message with tag 1") == std::string::npos) {
      return absl::InternalError(absl::StrCat("receive of tag 2 first: ", first.ToString()));
    }
    if (!absl::IsInvalidArgument(second) ||
        second.message().find("posted with tag 1 met a message with tag 2") == std::string::npos) {
      return absl::InternalError(absl::StrCat("receive of tag 1 second: ", second.ToString()));
    }
    RETURN_IF_ERROR(want3->Wait(kWait));
    return ExpectBytes(c, Pattern(3, 64), "tag 3 after the mismatches");
  });
}

// Both ranks post a 64 MiB send before their receive: with one communicator per direction the
// sends do not wait behind each other's receives.
TEST(NcclTransportTest, SimultaneousLargeExchangeDoesNotDeadlock) {
  SKIP_WITHOUT_TWO_DEVICES();
  constexpr size_t kSize = size_t{64} << 20;
  RunTwoRanks([](int rank, Transport&, Endpoint& peer) -> absl::Status {
    DeviceBytes out, in;
    RETURN_IF_ERROR(out.Allocate(kSize));
    RETURN_IF_ERROR(in.Allocate(kSize));
    RETURN_IF_ERROR(out.Upload(Pattern(rank, kSize)));
    ASSIGN_OR_RETURN(auto send, peer.Isend(out.get(), kSize, 5));
    // Drives the send's launch before the receive exists; its outcome is checked below.
    (void)send->Wait(absl::Milliseconds(100));
    ASSIGN_OR_RETURN(auto recv, peer.Irecv(in.get(), kSize, 5));
    RETURN_IF_ERROR(send->Wait(kWait));
    RETURN_IF_ERROR(recv->Wait(kWait));
    return ExpectBytes(in, Pattern(1 - rank, kSize), "64 MiB from the peer");
  });
}

}  // namespace
}  // namespace gravac::transport::nccl

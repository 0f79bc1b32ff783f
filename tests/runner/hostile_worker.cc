// A worker for gravacrun job tests that attacks its node's daemon through shared memory. The
// rank named by --hostile_rank speaks the worker protocol by hand (core/ipc, worker.proto): it
// registers a memfd that it did not seal, shrinks the file to nothing under the daemon's mapping
// and posts an allreduce that points into it — before sealing was required, gravacd died of
// SIGBUS in the local reduce. It prints the daemon's answer and exits 3. Every other rank runs a
// dense allreduce of the same tensor through the C API and prints "rank R: allreduce: <status>:
// <error>"; it exits 0 when the allreduce failed with a clear error and 1 when it succeeded.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/ipc/framing.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "gravac/gravac.h"
#include "gravac/v1/worker.pb.h"

namespace {

constexpr int64_t kCount = 1 << 16;

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

bool Send(int fd, const gravac::v1::WorkerMessage& msg, std::vector<int> fds = {}) {
  return gravac::ipc::SendFrame(fd, msg.SerializeAsString(), fds).ok();
}

// Reads daemon messages until one arrives or the socket closes; prints what it got.
void PrintReply(int fd, gravac::ipc::FrameReader& reader) {
  while (true) {
    auto frame = reader.Next();
    if (frame.ok() && frame->has_value()) {
      gravac::v1::DaemonMessage reply;
      reply.ParseFromString((*frame)->payload);
      std::printf("hostile: daemon answered: %s\n", reply.ShortDebugString().c_str());
      std::fflush(stdout);
      if (reply.has_welcome()) continue;
      return;
    }
    auto more = reader.ReadSome(fd);
    if (!more.ok() || !*more) {
      std::printf("hostile: daemon closed the connection\n");
      return;
    }
  }
}

int Hostile(int rank, int size, int local_rank, int local_size) {
  auto sock = gravac::ipc::ConnectUnix(std::getenv("GRAVAC_DAEMON_SOCKET"), absl::Seconds(10));
  if (!sock.ok()) return 2;
  gravac::ipc::FrameReader reader;
  gravac::v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(rank);
  hello.mutable_hello()->set_size(size);
  hello.mutable_hello()->set_local_rank(local_rank);
  hello.mutable_hello()->set_local_size(local_size);
  hello.mutable_hello()->set_pid(::getpid());
  hello.mutable_hello()->set_abi_version(gravac::ipc::kShmAbiVersion);
  if (!Send(sock->get(), hello)) return 2;
  // An unsealed memfd with a valid header, shrunk once the daemon has it.
  const uint64_t total = gravac::ipc::kShmDataOffset + kCount * sizeof(float);
  int memfd = ::memfd_create("hostile", MFD_CLOEXEC);
  if (memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(total)) != 0) return 2;
  gravac::ipc::ShmSegmentHeader h = gravac::ipc::MakeShmHeader(total);
  if (::pwrite(memfd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) return 2;
  gravac::v1::WorkerMessage reg;
  reg.mutable_register_segment()->set_segment_id(1);
  reg.mutable_register_segment()->set_bytes(total);
  if (!Send(sock->get(), reg, {memfd})) return 2;
  ::usleep(200 * 1000);  // the daemon maps it
  if (::ftruncate(memfd, 0) != 0) {
    std::printf("hostile: cannot shrink the memfd: %s\n", std::strerror(errno));
  }
  gravac::v1::WorkerMessage post;
  gravac::v1::Request* r = post.mutable_request();
  r->set_id(1);
  r->set_name("g");
  r->set_kind(gravac::v1::ALLREDUCE);
  r->set_dtype(gravac::v1::FLOAT32);
  r->add_shape(kCount);
  r->set_reduce_op(gravac::v1::SUM);
  r->set_step(-1);  // what the C API sends outside a training step
  r->set_segment_id(1);
  r->set_offset(0);
  r->set_bytes(kCount * sizeof(float));
  Send(sock->get(), post);
  PrintReply(sock->get(), reader);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  int hostile_rank = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--hostile_rank") == 0) hostile_rank = std::atoi(argv[i + 1]);
  }
  const int rank = EnvInt("GRAVAC_RANK");
  if (rank == hostile_rank) {
    return Hostile(rank, EnvInt("GRAVAC_SIZE"), EnvInt("GRAVAC_LOCAL_RANK"),
                   EnvInt("GRAVAC_LOCAL_SIZE"));
  }
  gravac_context* ctx = nullptr;
  char error[512] = {};
  if (gravac_init_verbose(&ctx, error, sizeof(error)) != GRAVAC_OK) {
    std::printf("rank %d: init: %s\n", rank, error);
    return 0;  // refused before the allreduce: also a clear error
  }
  std::vector<float> g(kCount, 1.0f);
  const int64_t shape[1] = {kCount};
  gravac_request* req = nullptr;
  gravac_status s = gravac_allreduce_async(ctx, "g", g.data(), g.data(), shape, 1, GRAVAC_FLOAT32,
                                           GRAVAC_SUM, nullptr, &req);
  if (s == GRAVAC_OK) s = gravac_wait(req);
  std::printf("rank %d: allreduce: %s: %s\n", rank, gravac_status_string(s),
              req != nullptr ? gravac_request_error(req) : gravac_last_error(ctx));
  std::fflush(stdout);
  if (req != nullptr) gravac_request_free(req);
  gravac_shutdown(ctx);
  return s == GRAVAC_OK ? 1 : 0;
}

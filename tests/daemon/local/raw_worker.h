// RawWorker: a worker speaking the worker protocol by hand over the daemon's socket, to send
// hellos the client library refuses and to die without saying goodbye.
//
// Thread-safety: one thread at a time.
#ifndef GRAVAC_TESTS_DAEMON_LOCAL_RAW_WORKER_H_
#define GRAVAC_TESTS_DAEMON_LOCAL_RAW_WORKER_H_

#include <unistd.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ipc/framing.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon::testing {

struct RawWorker {
  ipc::UniqueFd sock;
  ipc::FrameReader reader;
  std::string job_name, run_id;  // sent in the hello when set

  absl::Status Connect(const std::string& path) {
    auto s = ipc::ConnectUnix(path, absl::Seconds(5));
    if (!s.ok()) return s.status();
    sock = std::move(*s);
    return absl::OkStatus();
  }
  // Connect, then Hello.
  absl::Status Join(const std::string& path, int rank, int size, int local_rank, int local_size) {
    if (absl::Status s = Connect(path); !s.ok()) return s;
    return Hello(rank, size, local_rank, local_size);
  }
  absl::Status Hello(int rank, int size, int local_rank, int local_size) {
    ::gravac::v1::WorkerMessage m;
    m.mutable_hello()->set_rank(rank);
    m.mutable_hello()->set_size(size);
    m.mutable_hello()->set_local_rank(local_rank);
    m.mutable_hello()->set_local_size(local_size);
    m.mutable_hello()->set_pid(::getpid());
    m.mutable_hello()->set_abi_version(ipc::kShmAbiVersion);
    m.mutable_hello()->set_job_name(job_name);
    m.mutable_hello()->set_run_id(run_id);
    return ipc::SendFrame(sock.get(), m.SerializeAsString());
  }
  absl::StatusOr<::gravac::v1::DaemonMessage> Read() {
    while (true) {
      auto f = reader.Next();
      if (!f.ok()) return f.status();
      if (f->has_value()) {
        ::gravac::v1::DaemonMessage m;
        m.ParseFromString((*f)->payload);
        return m;
      }
      auto more = reader.ReadSome(sock.get());
      if (!more.ok()) return more.status();
      if (!*more) return absl::UnavailableError("closed");
    }
  }
};

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_LOCAL_RAW_WORKER_H_

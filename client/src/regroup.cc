#include "client/src/regroup.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/absl_compat.h"
#include "core/ipc/framing.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unix_socket.h"
#include "core/status.h"

namespace gravac::client {

absl::StatusOr<v1::Placement> Regroup(const ClientConfig& config, const RegroupRequest& request) {
  if (config.daemon_socket.empty()) {
    return absl::InvalidArgumentError("regroup: GRAVAC_DAEMON_SOCKET is not set");
  }
  if (config.local_size < 1 || config.local_rank < 0 || config.local_rank >= config.local_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "regroup: local rank %d of %d is not valid", config.local_rank, config.local_size));
  }
  ASSIGN_OR_RETURN(ipc::UniqueFd sock,
                   ipc::ConnectUnix(config.daemon_socket, config.connect_timeout));
  v1::WorkerMessage msg;
  v1::Hello* h = msg.mutable_hello();
  h->set_regroup(true);
  h->set_from_version(request.from_version);
  h->set_min_size(request.min_size);
  h->set_max_size(request.max_size);
  for (const std::string& n : request.expect_nodes) h->add_expect_nodes(n);
  h->set_local_rank(config.local_rank);
  h->set_local_size(config.local_size);
  h->set_rank(config.rank);
  h->set_size(config.size);
  h->set_pid(::getpid());
  h->set_abi_version(ipc::kShmAbiVersion);
  h->set_job_name(config.job_name);
  h->set_run_id(config.run_id);
  RETURN_IF_ERROR(ipc::SendFrame(sock.get(), msg.SerializeAsString(), {}, absl::Seconds(30)));
  const std::string who = absl::StrFormat("regroup of local rank %d of job '%s' run '%s'",
                                          config.local_rank, config.job_name, config.run_id);
  ipc::FrameReader reader;
  const absl::Time deadline = absl::Now() + request.timeout;
  while (true) {
    ASSIGN_OR_RETURN(auto frame, reader.Next());
    if (frame.has_value()) {
      v1::DaemonMessage reply;
      if (!reply.ParseFromString(frame->payload)) {
        return absl::DataLossError(StrCat(who, ": unparsable reply"));
      }
      if (reply.has_placement()) return reply.placement();
      if (reply.has_error()) {
        return absl::Status(static_cast<absl::StatusCode>(reply.error().code()),
                            reply.error().message());
      }
      if (reply.has_welcome()) {
        // A gravacd serving one fixed job took the regroup hello for a worker's hello.
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: the daemon at '%s' serves one fixed job (no --serve_jobs), so its job cannot "
            "change membership; start the job as an elastic one (gravacrun --min-np)",
            who, config.daemon_socket));
      }
      continue;  // a heartbeat: not the answer
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: no placement from the daemon at '%s' within %s", who, config.daemon_socket,
          absl::FormatDuration(request.timeout)));
    }
    pollfd p{sock.get(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left), 1000)) + 1);
    if (p.revents == 0) continue;
    ASSIGN_OR_RETURN(bool more, reader.ReadSome(sock.get()));
    if (!more) {
      return absl::UnavailableError(absl::StrFormat(
          "%s: the daemon at '%s' closed the connection without a placement (is it a "
          "--serve_jobs daemon of an elastic job, and alive?)",
          who, config.daemon_socket));
    }
  }
}

}  // namespace gravac::client

// UCX worker: one UCP context and one UCP worker (tag matching, single-thread mode), the unit the
// UCX transport backend is built on, plus the conversion of ucs_status_t to absl::Status.
//
// Configuration. UCX reads its UCX_* environment variables itself (ucp_config_read), so UCX_TLS
// ("tcp", "shm", "tcp,self", ...) and UCX_NET_DEVICES ("lo", "eth0", ...) set for the process are
// honoured. `params` given to Create override the environment; each key must be a UCX variable
// name with its "UCX_" prefix (e.g. {"UCX_TLS", "tcp"}); a key UCX does not know fails with
// kInvalidArgument (checked against the options UCX registered, as `ucx_info -c` lists them).
// A transport's option (UCX_TCP_PORT_RANGE, UCX_IB_...) reaches that transport's interfaces as
// UCX's environment would set it (worker.cc, ConfigName).
// Unless set by either, UCX_KEEPALIVE_INTERVAL is `liveness / 4`, so a peer that dies without its
// connection closing is noticed within about `liveness` on transports with keepalive; over tcp
// alone, messages up to kEagerMessageLimit go eager (see there).
//
// Waiting. The context is made with UCP_FEATURE_WAKEUP, so WaitForEvent can block in the kernel
// (poll on the worker's event fd) until the network has something for the worker, instead of
// spinning on ucp_worker_progress.
//
// Thread-safety: thread-compatible (UCS_THREAD_MODE_SERIALIZED): one thread at a time, not
// necessarily the same one.
#ifndef GRAVAC_DAEMON_TRANSPORT_UCX_WORKER_H_
#define GRAVAC_DAEMON_TRANSPORT_UCX_WORKER_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gravac::transport::ucx {

// Status for a failed UCX call: the call's text, ucs_status_string and file:line. Peer and
// connection failures map to kUnavailable, timeouts to kDeadlineExceeded, truncation and bad
// parameters to kInvalidArgument, missing devices/transports to kNotFound.
absl::Status UcsStatus(ucs_status_t status, const char* call, const char* file, int line);
absl::StatusCode UcsCode(ucs_status_t status);

#define GRAVAC_RETURN_IF_UCS(call)                                                               \
  do {                                                                                           \
    const ucs_status_t gravac_ucs_status_ = (call);                                              \
    if (gravac_ucs_status_ != UCS_OK) {                                                          \
      return ::gravac::transport::ucx::UcsStatus(gravac_ucs_status_, #call, __FILE__, __LINE__); \
    }                                                                                            \
  } while (false)

// Eager messages over TCP. UCX's own choice over tcp sends every message above a few KiB by
// rendezvous (the sender announces it, the receiver answers once its receive is posted, then the
// data moves), and that handshake travels in-band: the announcement queues behind the sender's
// data already in the socket, the answer behind everything the receiver has queued on the same
// connection. Where both directions of one connection carry bulk data (a ring of 2 ranks, whose
// left and right neighbour are the same peer) each message thus waits for about two send queues
// before it moves, and the ring's few chunks in flight cannot cover that: the allreduce of 2 ranks
// reached about 0.8 of an emulated 1 Gbit/s link with rendezvous (erratically 0.5 to 0.98 with 16
// to 64 chunks in flight) and 0.99 with eager messages.
//
// So, when UCX_TLS (from params, else the environment) names only tcp (and self) and neither sets
// UCX_RNDV_THRESH, messages of up to kEagerMessageLimit bytes (the collectives' default chunk) go
// eager and larger ones by rendezvous, so a peer that posts no receive cannot make UCX buffer a
// large message. Shared memory keeps UCX's choice (it has no failure detection, see below). An
// eager message travels in fragments; a receive already matched to the first one can no longer be
// cancelled, so when its sender dies mid-message the transport abandons it once the connection is
// closed (transport.h).
inline constexpr size_t kEagerMessageLimit = size_t{1} << 20;

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(
      const std::vector<std::pair<std::string, std::string>>& params, absl::Duration liveness);

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // The worker address (binary) that peers pass to ucp_ep_create.
  const std::string& address() const { return address_; }

  // One round of ucp_worker_progress; returns whether anything happened.
  bool Progress() { return ucp_worker_progress(worker_) != 0; }

  // Blocks until the worker may have work (an event on its event fd) or `timeout` passes;
  // returns OK in both cases (and on EINTR), so callers re-test what they wait for and bound the
  // loop themselves. The caller must have progressed the worker until idle just before (Progress
  // returned false): events that arrived earlier are then either handled or reported by
  // ucp_worker_arm (UCS_ERR_BUSY), in which case this returns at once. Fails only when arming or
  // polling fails.
  absl::Status WaitForEvent(absl::Duration timeout);

 private:
  Worker() = default;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // ucp_worker_get_efd; owned by the worker
  std::string address_;
};

}  // namespace gravac::transport::ucx

#endif  // GRAVAC_DAEMON_TRANSPORT_UCX_WORKER_H_

// UCX transport: the inter-node data-plane backend over UCP tag matching (host memory). Works
// over TCP between hosts or network namespaces and over shared memory between processes of one
// host; which transports and devices UCX may use follows UCX_TLS / UCX_NET_DEVICES from the
// environment or from TransportOptions::params (worker.h).
//
// Each Transport owns one UCP context + worker (worker.h). LocalAddress() is "ucx:<rank>:" followed
// by the binary worker address; Connect() creates a UCP endpoint to that address with
// UCP_ERR_HANDLING_MODE_PEER, so a dead or closed peer fails requests with kUnavailable naming
// the peer rank instead of hanging. Messages are ucp_tag_send_nbx / ucp_tag_recv_nbx with the tag
// (source rank << 48) | user tag, received with a full mask, so a receive matches only its peer.
//
// Semantics are those of transport.h, with these backend notes:
// - Progress is driven by Test, Wait, WaitForActivity and Progress (single-thread UCX worker).
//   Wait and WaitForActivity do not spin: they block in the kernel on the worker's event fd
//   (UCP_FEATURE_WAKEUP, ucp_worker_arm), in slices of at most 10 ms so UCX's timers still run.
// - Destroying a pending receive cancels it. Destroying a pending send first asks UCX to cancel
//   it; when UCX cannot within a short bound (a rendezvous send waiting for its receive), the
//   endpoint is closed (its other requests fail with kUnavailable) so the buffer is released.
// - Over tcp alone messages up to kEagerMessageLimit are eager (worker.h). A receive that has
//   taken the first fragments of such a message cannot be cancelled: when its peer fails or is
//   closed it fails with the peer's error all the same, and destroying it abandons it to UCX once
//   the endpoint's close is done (the connection is gone, so nothing more is written to it).
// - Close() fails local pending requests at once; the peer's requests on it fail with
//   kUnavailable when UCX tells the peer (at once over TCP).
// - Failure detection needs a transport that supports UCP_ERR_HANDLING_MODE_PEER (tcp; cma for
//   bulk data). With only posix/sysv shared memory allowed (UCX_TLS=shm) UCX 1.13 refuses that
//   mode, so the endpoint is made without it: a dead peer then shows as kDeadlineExceeded from
//   Wait, never as a hang, and the caller decides (see transport.h, "a silent peer"). Such an
//   endpoint cannot be force-closed either: closing it, or destroying a send UCX could not
//   cancel, abandons that peer's pending sends (they fail with kUnavailable; their UCX requests
//   are handed back to UCX), and UCX may still read such a send's buffer if the peer is in fact
//   alive and receives it later. A close still flushing when the transport is destroyed is handed
//   to UCX as well.
//
// Thread-safety: as transport.h (one thread per Transport and its Endpoints and Requests).
#ifndef GRAVAC_DAEMON_TRANSPORT_UCX_TRANSPORT_H_
#define GRAVAC_DAEMON_TRANSPORT_UCX_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/transport/transport.h"

namespace gravac::transport::ucx {

// Fails with kInvalidArgument for a bad rank/world size or parameter, and with UCX's error when
// the context or worker cannot be made (e.g. kNotFound when UCX_TLS/UCX_NET_DEVICES leave no
// usable transport).
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options);

// The memory this backend carries (transport.h, "Memory types").
inline constexpr MemoryTypes kMemoryTypes{.host = true};

// What UCX chose for an endpoint made by this backend (ucp_ep_print_info: lanes, transports,
// devices), for logs and tests. Fails with kInvalidArgument for an endpoint of another backend.
absl::StatusOr<std::string> DescribeEndpoint(Endpoint& endpoint);

}  // namespace gravac::transport::ucx

#endif  // GRAVAC_DAEMON_TRANSPORT_UCX_TRANSPORT_H_

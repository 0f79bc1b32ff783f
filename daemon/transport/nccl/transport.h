// NCCL transport: the data-plane backend for GPU (device) buffers, over NCCL point-to-point
// (ncclSend / ncclRecv). Every buffer given to Isend / Irecv must be device memory of this rank's
// CUDA device (or memory NCCL can address from it); host buffers are for the ucx backend. The
// collectives in daemon/collectives reduce on the host, so they do not run over this backend.
//
// Layout. Each rank owns one CUDA device (TransportOptions::params {"device", "<ordinal>"}, by
// default rank % device count; NCCL refuses two ranks of one communicator on the same device).
// Each direction of each connected pair is a Channel (channel.h): a two-rank NCCL communicator
// with its own stream, so sends and receives in both directions progress independently.
//
// Bootstrap. MakeTransport creates the ncclUniqueId of each outgoing channel (rank -> q) and
// LocalAddress() publishes them (address.h). Connect(q, blob) starts, without blocking, the
// communicator init of both channels with q (ncclCommInitRankConfig, non-blocking config): its own
// id for rank -> q, the id from q's blob for q -> rank. The init completes once q has called
// Connect for this rank too; Isend / Irecv posted before are held until then.
//
// Semantics are those of transport.h, with these backend notes:
// - No tags in NCCL: the messages of one direction of a pair match in posting order, whatever
//   their tags. Each message carries a header with its tag and size, checked by the receive it
//   meets: a tag mismatch or a too small receive buffer fails that receive with kInvalidArgument
//   naming both tags (sizes) and discards the message; later messages still match in order.
// - A receive of a message costs one extra round trip: its header is copied to the host before
//   the payload receive is posted (the payload size must be known to NCCL).
// - Completion is a CUDA event after each launched batch (Test: cudaEventQuery; Wait polls it up
//   to its timeout). A completed receive's data is visible to work later on any stream of the
//   device, and to the host.
// - Peer failure: an asynchronous NCCL error (ncclCommGetAsyncError) fails the endpoint with
//   kUnavailable naming the peer rank and aborts its communicators (ncclCommAbort). NCCL sees a
//   dead peer only on network transports; over NVLink / PCIe peer-to-peer a dead or closed peer
//   shows as kDeadlineExceeded from Wait, never as a hang.
// - Destroying a request whose message was launched, or closing an endpoint, aborts the
//   endpoint's channel(s): that direction fails on this side (and the peer sees silence).
//
// Thread-safety: as transport.h (one thread per Transport and its Endpoints and Requests); the
// calls set this rank's CUDA device on the calling thread.
#ifndef GRAVAC_DAEMON_TRANSPORT_NCCL_TRANSPORT_H_
#define GRAVAC_DAEMON_TRANSPORT_NCCL_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/transport/transport.h"

namespace gravac::transport::nccl {

// Fails with kInvalidArgument for a bad rank / world size or parameter (checked before any CUDA
// call; the only parameter is "device"), kFailedPrecondition when cudaGetDeviceCount fails or
// finds no device or the device does not exist, and NCCL's error when a unique id cannot be made.
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options);

// The memory this backend carries (transport.h, "Memory types").
inline constexpr MemoryTypes kMemoryTypes{.device = true};

}  // namespace gravac::transport::nccl

#endif  // GRAVAC_DAEMON_TRANSPORT_NCCL_TRANSPORT_H_

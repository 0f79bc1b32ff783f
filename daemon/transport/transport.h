// Transport: the data-plane interface between daemons (one per node), modelled on gloo's
// transport::Device/Pair. A Transport is one rank's network context; it makes one Endpoint per
// peer rank; an Endpoint moves tagged messages to and from that peer with asynchronous Isend /
// Irecv calls that return a Request to Test() or Wait() on. Backends live in subfolders with
// mirrored file names (loopback/transport.h, ucx/transport.h, nccl/transport.h), each exposing
//
//   absl::StatusOr<std::unique_ptr<Transport>> <backend>::MakeTransport(const TransportOptions&);
//
// and transport_registry.h is the only place that knows which backends were built.
//
// Bootstrap. Every rank builds its Transport, publishes LocalAddress() (an opaque blob) through a
// rendezvous (rendezvous.h until the controller exists), then calls Connect(peer, blob) once per
// peer. Connect does not block: the Endpoint becomes usable once both sides have called Connect
// for each other; Isend/Irecv posted before that are accepted and held until then.
//
// Messages. A message is a contiguous byte range with a 64-bit tag; user tags must be
// <= kMaxUserTag (backends may use the upper 16 bits, e.g. for the source rank). A receive
// matches the oldest unmatched message from the same peer with the same tag: messages between two
// endpoints with equal tags arrive in the order they were posted; different tags may complete in
// any order. A receive whose buffer is smaller than the matched message fails that request with
// kInvalidArgument (the message is consumed). Zero-byte messages are allowed (data may be null).
//
// Buffer ownership. The caller owns every buffer. An Isend buffer must stay valid and unchanged,
// and an Irecv buffer valid and untouched, until its Request reports completion (Test() returns
// true or an error, or Wait() returns) or the Request is destroyed. Completion of a send means the
// buffer may be reused, not that the peer has received it. Destroying a pending Request cancels
// it; when the destructor returns the transport no longer touches the buffer (a cancelled send may
// or may not have been delivered). Requests and Endpoints must be destroyed before the Transport
// that made them.
//
// Blocking. Only Request::Wait and Transport::WaitForActivity block (up to their timeout).
// Isend, Irecv, Connect, Test, Progress and Close return promptly. Backends that need explicit
// progress (UCX) drive it from Test, Wait, WaitForActivity and Progress, so a caller that only
// ever waits on its requests makes progress.
//
// Errors and timeouts. Operations return absl::Status, never throw. A peer that closed its
// endpoint, or died in a way the backend can see, fails the pending and later requests on that
// endpoint with kUnavailable naming the peer rank. A silent peer is not an error to the transport:
// Wait(timeout) returns kDeadlineExceeded and the request stays pending; callers (the
// collectives) decide when silence is fatal. options.op_timeout bounds how long a backend with its
// own liveness checks (e.g. UCX keepalive) may take to declare a peer dead.
//
// Memory types. Each backend declares the memory its Isend / Irecv buffers may live in
// (memory_types(), and the same constant in the registry table, so that a daemon can refuse a
// configuration before it builds anything): loopback and ucx carry host memory, nccl device
// memory of its rank's CUDA device. Giving a backend memory it does not carry is a caller bug.
//
// Thread-safety: thread-compatible. A Transport together with its Endpoints and Requests must be
// used by one thread at a time (a backend may run UCX in single-thread mode). Distinct Transports
// are independent and may be used from different threads at once.
#ifndef GRAVAC_DAEMON_TRANSPORT_TRANSPORT_H_
#define GRAVAC_DAEMON_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "core/memory_type.h"

namespace gravac::transport {

// Largest tag a caller may use; the upper 16 bits belong to the backend.
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << 48) - 1;

// Where a buffer lives (core/memory_type.h).
using ::gravac::MemoryType;
using ::gravac::MemoryTypeName;

// The memory types a backend carries.
struct MemoryTypes {
  bool host = false;
  bool device = false;

  constexpr bool Carries(MemoryType t) const { return t == MemoryType::kHost ? host : device; }
  // "host", "device", "host and device" (or "nothing").
  std::string ToString() const {
    if (host && device) return "host and device";
    return host ? "host" : device ? "device" : "nothing";
  }
};

// Backend-specific shared state handed to a factory: e.g. loopback::Fabric, through which the
// in-process transports of ranks 0..p-1 reach each other. Factories dynamic_cast it to their own
// type and fail with kInvalidArgument when it is missing or of the wrong type.
class TransportContext {
 public:
  virtual ~TransportContext() = default;
};

struct TransportOptions {
  int rank = 0;
  int world_size = 1;
  // Liveness bound for backends that detect dead peers themselves (see the header comment).
  absl::Duration op_timeout = absl::Seconds(30);
  // Not owned; must outlive every Transport made with it. Required by loopback, unused by ucx.
  TransportContext* context = nullptr;
  // Backend settings as {key, value} (e.g. {"UCX_TLS", "tcp"}); a backend rejects keys it does
  // not know with kInvalidArgument.
  std::vector<std::pair<std::string, std::string>> params;
};

// One asynchronous send or receive.
class Request {
 public:
  virtual ~Request() = default;  // cancels the operation if still pending (see header comment)

  // Does not block. true when complete, false while pending, the error when it failed. Once it
  // returned true or an error it keeps returning the same.
  virtual absl::StatusOr<bool> Test() = 0;

  // Blocks until completion (OK), failure (that error) or `timeout` (kDeadlineExceeded; the
  // request stays pending and may be waited on again). A zero timeout is a Test().
  virtual absl::Status Wait(absl::Duration timeout) = 0;

  // Bytes transferred; for a receive, the matched message's size. Meaningful once complete.
  virtual size_t bytes() const = 0;
};

// The connection to one peer rank.
class Endpoint {
 public:
  virtual ~Endpoint() = default;  // closes the endpoint

  virtual int peer_rank() const = 0;

  // Posts a send of [data, data + size) with `tag` (<= kMaxUserTag, else kInvalidArgument).
  // Fails at once with kUnavailable when the endpoint is already closed.
  virtual absl::StatusOr<std::unique_ptr<Request>> Isend(const void* data, size_t size,
                                                         uint64_t tag) = 0;

  // Posts a receive of the next message with `tag` from the peer into [data, data + capacity).
  virtual absl::StatusOr<std::unique_ptr<Request>> Irecv(void* data, size_t capacity,
                                                         uint64_t tag) = 0;

  // Closes the connection: pending requests on both sides fail with kUnavailable and later
  // Isend/Irecv calls fail. Idempotent; does not block.
  virtual void Close() = 0;
};

// One rank's network context.
class Transport {
 public:
  virtual ~Transport() = default;

  // Backend name as in the registry ("loopback", "ucx", ...).
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The memory types Isend / Irecv buffers may live in (see "Memory types" above).
  virtual MemoryTypes memory_types() const = 0;

  // Opaque blob that peers pass to Connect to reach this rank. Stable for the Transport's life.
  virtual std::string LocalAddress() const = 0;

  // Makes the endpoint to `peer_rank` (!= rank(), < world_size()) from that peer's
  // LocalAddress(). Non-blocking (see header comment). A malformed blob, a blob of another rank
  // or a second Connect to the same peer fail with kInvalidArgument.
  virtual absl::StatusOr<std::unique_ptr<Endpoint>> Connect(int peer_rank,
                                                            std::string_view peer_address) = 0;

  // Drives pending operations without blocking; a no-op for backends that need none.
  virtual absl::Status Progress() = 0;

  // For a caller that polls several requests (the collectives): progresses, then blocks until
  // the backend sees activity that may complete one of this transport's requests or `timeout`
  // passes, without spinning (e.g. UCX waits in the kernel on its worker's event fd). OK does not
  // mean a request completed: it may return early or spuriously, so callers re-Test their
  // requests and bound the loop by their own deadline. kUnimplemented (the default) when the
  // backend cannot wait for activity; the caller then waits on one request or sleeps instead.
  virtual absl::Status WaitForActivity(absl::Duration timeout) {
    (void)timeout;
    return absl::UnimplementedError(
        absl::StrFormat("transport %s: WaitForActivity is not supported", name()));
  }
};

}  // namespace gravac::transport

#endif  // GRAVAC_DAEMON_TRANSPORT_TRANSPORT_H_

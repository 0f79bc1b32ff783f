// Loopback transport: the in-process backend, for tests and single-process runs. Ranks are
// threads of one process that share a loopback::Fabric (fabric.h), passed as
// TransportOptions::context. Addresses are "loopback:<fabric id>:<rank>"; Connect rejects an
// address of another fabric or another rank.
//
// Semantics are those of transport.h, with rendezvous delivery (fabric.h). Progress() is a no-op:
// matching runs on the threads that post, Test and Wait.
//
// Thread-safety: as transport.h (one thread per Transport); the shared Fabric is thread-safe, so
// the transports of different ranks run on different threads.
#ifndef GRAVAC_DAEMON_TRANSPORT_LOOPBACK_TRANSPORT_H_
#define GRAVAC_DAEMON_TRANSPORT_LOOPBACK_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport.h"

namespace gravac::transport::loopback {

// Fails with kInvalidArgument when options.context is not a Fabric or the sizes disagree.
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options);

// The memory this backend carries (transport.h, "Memory types").
inline constexpr MemoryTypes kMemoryTypes{.host = true};

}  // namespace gravac::transport::loopback

#endif  // GRAVAC_DAEMON_TRANSPORT_LOOPBACK_TRANSPORT_H_

// Transport registry: the one table that knows which transport backends were built.
//
//   ASSIGN_OR_RETURN(auto transport, MakeTransport("loopback", options));
//
// "loopback" is always built; "ucx" is listed when daemon/transport/ucx/ was built (CMake defines
// GRAVAC_HAVE_UCX_TRANSPORT on gravac_transport), "nccl" when daemon/transport/nccl/ was (CUDA and
// NCCL found: GRAVAC_HAVE_NCCL_TRANSPORT). Each backend exposes
// <backend>::MakeTransport(const TransportOptions&) from <backend>/transport.h.
//
// Thread-safety: stateless; the table is constant.
#ifndef GRAVAC_DAEMON_TRANSPORT_TRANSPORT_REGISTRY_H_
#define GRAVAC_DAEMON_TRANSPORT_TRANSPORT_REGISTRY_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/transport/transport.h"

namespace gravac::transport {

using TransportFactory = absl::StatusOr<std::unique_ptr<Transport>> (*)(const TransportOptions&);

struct TransportBackend {
  std::string_view name;
  TransportFactory factory;
  MemoryTypes memory_types;  // what its transports carry
};

// The backends in this build, in a fixed order ("loopback" first).
absl::Span<const TransportBackend> TransportBackends();

// Builds the backend called `name`; unknown names fail with kInvalidArgument listing the built
// ones. Options are validated (0 <= rank < world_size) before the factory runs.
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(std::string_view name,
                                                         const TransportOptions& options);

// OK when backend `name` carries `buffers`; kInvalidArgument naming both (and `user`, the
// component whose buffers they are) when it does not, and for unknown names as MakeTransport.
// Needs no device and builds nothing: gravacd calls it while parsing its settings.
absl::Status CheckCarries(std::string_view name, MemoryType buffers, std::string_view user);

}  // namespace gravac::transport

#endif  // GRAVAC_DAEMON_TRANSPORT_TRANSPORT_REGISTRY_H_

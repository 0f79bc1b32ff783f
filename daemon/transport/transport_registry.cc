#include "daemon/transport/transport_registry.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/transport/loopback/transport.h"
#ifdef GRAVAC_HAVE_UCX_TRANSPORT
#include "daemon/transport/ucx/transport.h"
#endif
#ifdef GRAVAC_HAVE_NCCL_TRANSPORT
#include "daemon/transport/nccl/transport.h"
#endif

namespace gravac::transport {
namespace {

constexpr TransportBackend kBackends[] = {
    {"loopback", &loopback::MakeTransport},
#ifdef GRAVAC_HAVE_UCX_TRANSPORT
    {"ucx", &ucx::MakeTransport},
#endif
#ifdef GRAVAC_HAVE_NCCL_TRANSPORT
    {"nccl", &nccl::MakeTransport},
#endif
};

}  // namespace

absl::Span<const TransportBackend> TransportBackends() { return kBackends; }

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(std::string_view name,
                                                         const TransportOptions& options) {
  const std::string wanted(name);
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("transport '", wanted, "': rank ", options.rank,
                                                   " outside world of size ", options.world_size));
  }
  std::string known;
  for (const TransportBackend& backend : kBackends) {
    if (backend.name == name) return backend.factory(options);
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(backend.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", wanted, "'; built: ", known));
}

}  // namespace gravac::transport

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
    {"loopback", &loopback::MakeTransport, loopback::kMemoryTypes},
#ifdef GRAVAC_HAVE_UCX_TRANSPORT
    {"ucx", &ucx::MakeTransport, ucx::kMemoryTypes},
#endif
#ifdef GRAVAC_HAVE_NCCL_TRANSPORT
    {"nccl", &nccl::MakeTransport, nccl::kMemoryTypes},
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

absl::Status CheckCarries(std::string_view name, MemoryType buffers, std::string_view user) {
  std::string known;
  std::string carriers;
  for (const TransportBackend& backend : kBackends) {
    if (backend.name == name) {
      if (backend.memory_types.Carries(buffers)) return absl::OkStatus();
      for (const TransportBackend& b : kBackends) {
        if (b.memory_types.Carries(buffers)) {
          absl::StrAppend(&carriers, carriers.empty() ? "" : ", ", std::string(b.name));
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "transport '", std::string(name), "' carries ", backend.memory_types.ToString(),
          " memory only, but ", std::string(user), " exchanges ",
          std::string(MemoryTypeName(buffers)), " buffers; transports built for ",
          std::string(MemoryTypeName(buffers)), " memory: ",
          carriers.empty() ? "none" : carriers));
    }
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(backend.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", std::string(name), "'; built: ", known));
}

}  // namespace gravac::transport

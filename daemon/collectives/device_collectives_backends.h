// The one place that knows which DeviceCollectives (device_collectives.h) this build has: "host"
// always (host_device_collectives.h), "nccl" when gravac was built with CUDA and NCCL
// (nccl_device_collectives.h; CMake defines GRAVAC_HAVE_NCCL_DEVICE_COLLECTIVES on this file
// only). gravacd chooses between them (daemon/device_collectives_choice.h); callers never test
// build macros themselves.
//
// Thread-safety: stateless.
#ifndef GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_BACKENDS_H_
#define GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_BACKENDS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"

namespace gravac::collectives {

// Whether the nccl device collectives were built.
bool NcclDeviceCollectivesBuilt();

// NcclDeviceCollectives::Create (bootstrapped over `bootstrap`, see its header);
// kFailedPrecondition "built without NCCL" when they were not built.
absl::StatusOr<std::unique_ptr<DeviceCollectives>> MakeNcclDeviceCollectives(
    Communicator& bootstrap, const DeviceCollectivesOptions& options);

// A HostDeviceCollectives over `comm` (borrowed: see host_device_collectives.h).
std::unique_ptr<DeviceCollectives> MakeHostDeviceCollectives(Communicator& comm);

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_BACKENDS_H_

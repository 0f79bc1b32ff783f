#include "daemon/collectives/device_collectives_backends.h"

#include "daemon/collectives/host_device_collectives.h"
#if GRAVAC_HAVE_NCCL_DEVICE_COLLECTIVES
#include "daemon/collectives/nccl_device_collectives.h"
#endif

namespace gravac::collectives {

bool NcclDeviceCollectivesBuilt() { return GRAVAC_HAVE_NCCL_DEVICE_COLLECTIVES != 0; }

absl::StatusOr<std::unique_ptr<DeviceCollectives>> MakeNcclDeviceCollectives(
    Communicator& bootstrap, const DeviceCollectivesOptions& options) {
#if GRAVAC_HAVE_NCCL_DEVICE_COLLECTIVES
  absl::StatusOr<std::unique_ptr<NcclDeviceCollectives>> made =
      NcclDeviceCollectives::Create(bootstrap, options);
  if (!made.ok()) return made.status();
  return std::unique_ptr<DeviceCollectives>(*std::move(made));
#else
  (void)bootstrap;
  (void)options;
  return absl::FailedPreconditionError(
      "the nccl device collectives are not built (gravac was built without CUDA or NCCL)");
#endif
}

std::unique_ptr<DeviceCollectives> MakeHostDeviceCollectives(Communicator& comm) {
  return std::make_unique<HostDeviceCollectives>(comm);
}

}  // namespace gravac::collectives

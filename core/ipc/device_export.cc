// The build-independent part of the CUDA IPC handoff: checks on an export that need no CUDA.
#include "core/ipc/device_export.h"

#include <limits>

#include "absl/strings/str_format.h"

namespace gravac::ipc {

absl::Status ValidateExport(int worker, const DeviceBufferExport& e) {
  if (e.allocation_bytes == 0 ||
      e.base_address > std::numeric_limits<uint64_t>::max() - e.allocation_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d, field allocation_bytes: an allocation of %d bytes at 0x%x is not a device "
        "allocation",
        worker, e.allocation_bytes, e.base_address));
  }
  if (e.offset > e.allocation_bytes || e.bytes > e.allocation_bytes - e.offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d, field bytes: %d bytes at offset %d overrun the exported allocation of %d "
        "bytes",
        worker, e.bytes, e.offset, e.allocation_bytes));
  }
  if (e.device < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker %d, field device: %d is not a CUDA device", worker, e.device));
  }
  return absl::OkStatus();
}

}  // namespace gravac::ipc

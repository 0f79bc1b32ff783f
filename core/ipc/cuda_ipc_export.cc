// The build-independent part of cuda_ipc.h: checks on an export that need no CUDA.
#include "absl/strings/str_format.h"
#include "core/ipc/cuda_ipc.h"

namespace gravac::ipc {

absl::Status ValidateExport(int worker, const DeviceBufferExport& e) {
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

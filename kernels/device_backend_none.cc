// MakeDeviceBackend in a build without CUDA (GRAVAC_WITH_CUDA=OFF): there is no device backend;
// callers stage device tensors through host memory.
#include "absl/strings/str_format.h"
#include "kernels/backend.h"

namespace gravac::kernels {

absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeDeviceBackend(int device) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "CUDA device %d: gravac was built without CUDA (GRAVAC_WITH_CUDA=OFF)", device));
}

}  // namespace gravac::kernels

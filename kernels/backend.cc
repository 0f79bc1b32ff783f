// MakeCompressionBackend: the one place that picks a compression backend by memory type.
#include "kernels/backend.h"

#include "absl/strings/str_format.h"
#include "kernels/cpu/backend.h"

namespace gravac::kernels {

absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeCompressionBackend(MemoryType type,
                                                                           int device,
                                                                           ThreadPool* pool) {
  if (type == MemoryType::kHost) return cpu::MakeCpuBackend(pool);
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a compression backend for device memory needs a CUDA device, got %d", device));
  }
  absl::StatusOr<std::unique_ptr<CompressionBackend>> backend = MakeDeviceBackend(device);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrFormat("no compression backend for %s memory: %s",
                                        MemoryTypeName(type), backend.status().message()));
  }
  return backend;
}

}  // namespace gravac::kernels

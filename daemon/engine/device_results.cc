#include "daemon/engine/device_results.h"

#include <utility>

namespace gravac::daemon::internal {

DeviceResults::DeviceResults(std::unique_ptr<kernels::CompressionBackend> backend)
    : buffers_(DeviceBuffers::Make(std::move(backend))) {}

absl::StatusOr<std::shared_ptr<const DeviceData>> DeviceResults::Copy(
    kernels::CompressionBackend& dev, const void* src, size_t bytes) {
  // A buffer of the pool is reused only after its last reader finished (the DeviceData contract),
  // and this copy is queued on dev's stream, where the step's later copies into it queue after.
  return buffers_->Fill(bytes, [&](kernels::CompressionBackend&, kernels::BackendMemory& out) {
    return bytes > 0 ? dev.CopyWithin(out.data(), src, bytes) : absl::OkStatus();
  });
}

}  // namespace gravac::daemon::internal

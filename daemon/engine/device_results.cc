#include "daemon/engine/device_results.h"

#include <utility>

namespace gravac::daemon::internal {

DeviceResults::DeviceResults(std::unique_ptr<kernels::CompressionBackend> backend)
    : buffers_(DeviceBuffers::Make(std::move(backend))) {}

absl::StatusOr<std::shared_ptr<const DeviceData>> DeviceResults::Build(
    kernels::CompressionBackend& dev, size_t bytes, absl::FunctionRef<absl::Status(void*)> build) {
  // A buffer of the pool is reused only after its last reader finished (the DeviceData contract),
  // and `build` queues on dev's stream, where the step's later work on its scratch queues after.
  return buffers_->Fill(bytes, [&](kernels::CompressionBackend&, kernels::BackendMemory& out) {
    return build(out.data());
  });
}

}  // namespace gravac::daemon::internal

// DeviceResults: the buffers in device memory in which the engine's device step (executor.h,
// "Device step") hands a result back to the local side (TensorResult::device_data), instead of a
// copy to host memory, when the tensor's workers are on the device collectives' device. Each
// result is built in a buffer of its own (a sparse step's sum straight in it, a dense step's
// copied out of the fused buffer that the next group reuses): taken from a pool of that device
// (daemon/engine/device_buffer_pool.h; a steady step of same-sized tensors allocates nothing after
// its first) and given back to it when the last reference to the DeviceData goes (after the local
// side wrote it to the workers' buffers: ipc::DeviceAccess::WriteFromDevice returns once its copy
// finished).
//
// The buffers come from a DeviceBuffers (daemon/engine/device_buffer_pool.h) over a compression
// backend of the device owned here (not the step's, which the Executor owns): it allocates them
// and copies a result to host memory for whoever needs it there (ResultHostData). The pool and
// that backend live as long as the last DeviceData, so a result may outlive the Executor.
//
// Thread-safety: Build is called by the engine thread; the DeviceData it returns may be read and
// released on any thread (the pool and the owned backend are serialised by a mutex).
#ifndef GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_
#define GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_

#include <cstddef>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/engine/device_data.h"
#include "daemon/engine/device_buffer_pool.h"
#include "kernels/backend.h"

namespace gravac::daemon::internal {

class DeviceResults {
 public:
  // Over `backend`, a compression backend of the device the results will lie on.
  explicit DeviceResults(std::unique_ptr<kernels::CompressionBackend> backend);

  int device() const { return buffers_->device(); }

  // A buffer of the pool of `bytes` bytes, filled by `build(out)`, which writes every byte of
  // `out` (memory of that device) with `dev`'s operations: queued on dev's stream, so the caller
  // synchronises `dev` before it hands the result over (the DeviceData contract: complete when
  // handed over). The backend's error if no buffer can be had, or build's (the buffer then goes
  // back to the pool).
  absl::StatusOr<std::shared_ptr<const DeviceData>> Build(
      kernels::CompressionBackend& dev, size_t bytes, absl::FunctionRef<absl::Status(void*)> build);

  DeviceBufferPool::Counts counts() const { return buffers_->counts(); }

 private:
  std::shared_ptr<DeviceBuffers> buffers_;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_

// DeviceResults: the buffers in device memory in which the engine's device step (executor.h,
// "Device step") hands a result back to the local side (TensorResult::device_data), instead of a
// copy to host memory, when the tensor's workers are on the device collectives' device. The step
// builds each sum in its scratch, which the next group reuses, so each result gets a buffer of
// its own: taken from a pool of that device (daemon/local/device_buffer_pool.h; a steady step of
// same-sized tensors allocates nothing after its first) and given back to it when the last
// reference to the DeviceData goes (after the local side wrote it to the workers' buffers:
// ipc::DeviceAccess::WriteFromDevice returns once its copy finished).
//
// The buffers come from a DeviceBuffers (daemon/local/device_buffer_pool.h) over a compression
// backend of the device owned here (not the step's, which the Executor owns): it allocates them
// and copies a result to host memory for whoever needs it there (ResultHostData). The pool and
// that backend live as long as the last DeviceData, so a result may outlive the Executor.
//
// Thread-safety: Copy is called by the engine thread; the DeviceData it returns may be read and
// released on any thread (the pool and the owned backend are serialised by a mutex).
#ifndef GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_
#define GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/engine/device_data.h"
#include "daemon/local/device_buffer_pool.h"
#include "kernels/backend.h"

namespace gravac::daemon::internal {

class DeviceResults {
 public:
  // Over `backend`, a compression backend of the device the results will lie on.
  explicit DeviceResults(std::unique_ptr<kernels::CompressionBackend> backend);

  int device() const { return buffers_->device(); }

  // A buffer of the pool holding `bytes` bytes copied from `src` (memory of that device) by
  // `dev`'s CopyWithin: queued on dev's stream, so the caller synchronises `dev` before it hands
  // the result over (the DeviceData contract: complete when handed over). The backend's error
  // if no buffer can be had or the copy cannot be queued.
  absl::StatusOr<std::shared_ptr<const DeviceData>> Copy(kernels::CompressionBackend& dev,
                                                         const void* src, size_t bytes);

  DeviceBufferPool::Counts counts() const { return buffers_->counts(); }

 private:
  std::shared_ptr<DeviceBuffers> buffers_;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_DEVICE_RESULTS_H_

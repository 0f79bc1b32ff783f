// DeviceData: a tensor held in device memory, in either direction across the local side / engine
// seam: the node's sum, as the local side hands it to the engine when it reduced the node's
// workers on their CUDA device (NodeTensor::device_data; the engine's compression backend of that
// device reads it in place, BackendCompression::CompensateFromDevice); and a result, as the
// engine's device step hands it back (TensorResult::device_data; the local side copies it into
// its workers' buffers of that device, ipc::DeviceAccess::WriteFromDevice). Every other path
// copies it to host memory first (CopyToHost).
//
// Lifetime: the memory may be reused as soon as the last reference goes (the local reduce keeps
// its buffers in a pool: daemon/local/device_reduce.h): a reader that queued work on it on a
// stream of its own (a device backend's kernels) must have waited for that work (a synchronising
// call: SumSquares, CopyToHost, Synchronize) before it releases the DeviceData.
//
// Thread-safety: made on one side's thread, then used by the other side's thread alone; the
// memory is complete (its reduce or the engine's sum finished, no work pending on it) when it is
// handed over. Releasing it is safe on any thread.
#ifndef GRAVAC_DAEMON_ENGINE_DEVICE_DATA_H_
#define GRAVAC_DAEMON_ENGINE_DEVICE_DATA_H_

#include <cstddef>

#include "absl/status/status.h"

namespace gravac::daemon {

class DeviceData {
 public:
  virtual ~DeviceData() = default;
  // The CUDA device whose memory holds the data.
  virtual int device() const = 0;
  // The data: bytes() bytes of that device's memory (not dereferenceable on the host).
  virtual const void* data() const = 0;
  virtual size_t bytes() const = 0;
  // Copies the bytes() bytes into host memory `host`; blocks until they are there.
  virtual absl::Status CopyToHost(void* host) const = 0;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_DEVICE_DATA_H_

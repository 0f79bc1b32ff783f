// DeviceReduce: the local reduce of a node's workers in device memory. When every local worker of
// an fp32 allreduce hands a buffer of the same CUDA device (mapped by CUDA IPC, ready: their
// events waited for), SumFloat32 adds them in local-rank order into a buffer of that device, bit
// for bit what CombineLocal's host sum gives (collectives::ReduceSum's fp32 additions, in the
// same order), and hands it over as the NodeTensor's DeviceData: the engine compresses it where
// it lies (daemon/engine/backend_compression.h).
//
// BackendDeviceReduce is the implementation, over kernels' CompressionBackend of the device (its
// Compensate is the fp32 addition, CopyWithin the one-worker copy): the CUDA backend in gravacd,
// a fake that runs the CPU kernels on memory of its own in tests.
//
// Buffers: the sums of each device come from a pool of that device (daemon/engine/
// device_buffer_pool.h) instead of a new device allocation per call (cudaMalloc / cudaFree
// synchronise the device): a steady step of same-sized tensors allocates nothing after its first.
// When the last reference to a returned DeviceData goes, its buffer goes back to the pool (not
// freed) and the next SumFloat32 of that size writes into it. So whoever reads a sum on a stream
// of its own (the engine's device backend, BackendCompression::CompensateFromDevice) must have
// waited for that work to finish before it drops the DeviceData. The pool's free plus held bytes
// never exceed the most bytes of sums held at once; the oldest free buffers are freed first when
// sizes change. The pool lives as long as the last DeviceData of its device, so a DeviceData may
// outlive the reducer.
//
// Thread-safety: SumFloat32 may be called from any thread; the DeviceData it returns may be used
// and released on another (one backend and pool per device, their calls serialised by a mutex).
#ifndef GRAVAC_DAEMON_LOCAL_DEVICE_REDUCE_H_
#define GRAVAC_DAEMON_LOCAL_DEVICE_REDUCE_H_

#include <cstddef>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/mutex.h"
#include "daemon/engine/device_data.h"
#include "daemon/engine/device_buffer_pool.h"
#include "daemon/local/local_reduce.h"
#include "kernels/backend.h"

namespace gravac::daemon {

class DeviceReduce {
 public:
  virtual ~DeviceReduce() = default;
  // Whether device `device` can be used (its backend made on first use): OK, or
  // kFailedPrecondition naming it, before the caller waits for the inputs to be ready.
  virtual absl::Status Prepare(int device) = 0;
  // The sum of `inputs` (each `bytes` bytes of fp32 in memory of CUDA device `device`, in
  // local-rank order; at least one) in a buffer of that device's memory, complete when it
  // returns; the buffer is the caller's until it drops the DeviceData (see "Buffers" above).
  // kFailedPrecondition when the device cannot be used (the caller reduces in host memory);
  // kInvalidArgument for no inputs or a size that is not whole floats.
  virtual absl::StatusOr<std::shared_ptr<const DeviceData>> SumFloat32(
      int device, absl::Span<const void* const> inputs, size_t bytes) = 0;
};

// The NodeTensor of agreeing allreduce `inputs` (in local-rank order, as CombineLocal's) whose
// sum `sum` is in device memory: spec and samples as CombineLocal gives, `data` empty.
NodeTensor CombineOnDevice(absl::Span<const LocalInput> inputs, int64_t posted_at_ns,
                           std::shared_ptr<const DeviceData> sum);

class BackendDeviceReduce : public DeviceReduce {
 public:
  // `make_backend` null: kernels::MakeDeviceBackend.
  explicit BackendDeviceReduce(kernels::DeviceBackendFactory make_backend = nullptr);
  ~BackendDeviceReduce() override;

  absl::Status Prepare(int device) override { return DeviceFor(device).status(); }

  absl::StatusOr<std::shared_ptr<const DeviceData>> SumFloat32(int device,
                                                               absl::Span<const void* const> inputs,
                                                               size_t bytes) override;

  // The counts of device `device`'s pool of sums (all zero before its first use).
  DeviceBufferPool::Counts PoolCounts(int device);

 private:
  absl::StatusOr<std::shared_ptr<DeviceBuffers>> DeviceFor(int device);

  kernels::DeviceBackendFactory make_backend_;
  Mutex mu_;
  std::map<int, std::shared_ptr<DeviceBuffers>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_LOCAL_DEVICE_REDUCE_H_

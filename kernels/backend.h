// CompressionBackend: the kernels of an error-feedback top-k step (GRAVAC.md "Error feedback",
// "Multi-level compression") run where the tensor lives, behind one interface. The CPU backend
// (kernels/cpu/backend.h) works on host memory with the CPU reference kernels; the CUDA backend
// (kernels/cuda/backend.h) on the memory of one CUDA device with the CUDA twins, on a stream of
// its own. MakeCompressionBackend picks one by memory type. Because every CUDA kernel matches
// its CPU twin bit for bit, a step gives the same residual, indices, values and norms on both.
//
// Contract, for every backend:
//  - Every pointer argument is memory of the backend's memory_type() (host memory for the CPU
//    backend, memory of device() for the CUDA one); Allocate gives such memory. Passing other
//    memory is a caller bug (the CUDA kernels would fault).
//  - Element counts are 0 <= n <= 2^31 - 1 (int32 indices), else kInvalidArgument.
//  - Zero, CopyWithin, Compensate, UpdateResidual, ScatterAdd and DivideAll may run
//    asynchronously (the CUDA backend queues them on its stream); TopK, SumSquares, CopyToHost and
//    Synchronize wait for the work queued before them and report errors it latched (out-of-range
//    indices, non-finite input), naming the first bad position.
//  - Non-finite input to TopK is kInvalidArgument naming the first bad index.
//
// Thread-safety: a backend is not thread-safe (one owner, e.g. the engine thread; the CUDA
// backend's scratch and stream are shared by its calls). Distinct backends are independent.
#ifndef GRAVAC_KERNELS_BACKEND_H_
#define GRAVAC_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_type.h"
#include "core/thread_pool.h"

namespace gravac::kernels {

// A block of a backend's memory; freed by its destructor.
class BackendMemory {
 public:
  virtual ~BackendMemory() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
  float* floats() { return static_cast<float*>(data()); }
  int32_t* ints() { return static_cast<int32_t*>(data()); }
};

class CompressionBackend {
 public:
  virtual ~CompressionBackend() = default;

  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  virtual MemoryType memory_type() const = 0;
  virtual int device() const { return -1; }  // the CUDA ordinal; -1 for host memory

  // `bytes` of this backend's memory, zeroed (a zero-byte block may have a null data()).
  virtual absl::StatusOr<std::unique_ptr<BackendMemory>> Allocate(size_t bytes) = 0;
  // Blocking copies between host memory and this backend's memory (after the queued work).
  virtual absl::Status CopyFromHost(void* dst, const void* host, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host, const void* src, size_t bytes) = 0;
  // Zeroes `bytes` of this backend's memory (queued like Compensate).
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  // Copies `bytes` between two blocks of this backend's memory, bytes exactly (queued like
  // Compensate; the blocks must not overlap).
  virtual absl::Status CopyWithin(void* dst, const void* src, size_t bytes) = 0;

  // p[i] = grad[i] + residual[i], rounded to nearest (p may alias grad or residual).
  virtual absl::Status Compensate(const float* grad, const float* residual, float* p,
                                  int64_t n) = 0;
  // Compensate, and ‖grad‖ summed in kernels::L2Norm's order (the daemon's statistics) from the
  // same pass, where the backend can fuse the two: the CPU backend. kUnimplemented elsewhere (the
  // CUDA backend: that order is a sequential sum; its SumSquares is the device's norm).
  virtual absl::StatusOr<double> CompensateWithNorm(const float* grad, const float* residual,
                                                    float* p, int64_t n) {
    (void)grad, (void)residual, (void)p, (void)n;
    return absl::UnimplementedError(
        "CompensateWithNorm: this backend takes norms with SumSquares only");
  }
  // Exact top-k of |p| (ties: the lower index), min(k, n) pairs with ascending indices.
  virtual absl::Status TopK(const float* p, int64_t n, int64_t k, int32_t* indices,
                            float* values) = 0;
  // residual = p (skipped when they alias), then residual[indices[j]] -= values[j], j < k.
  virtual absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                                      const float* values, int64_t k, float* residual) = 0;
  // out[indices[j]] += scale * values[j], j < k (decompression of a sparse message).
  virtual absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k,
                                  float scale, float* out, int64_t n) = 0;
  // x[i] = x[i] / divisor, rounded to nearest, for i < n: the division of an average, bit for bit
  // kernels::cpu::DivideAll (kernels/cpu/scatter_add.h). Queued like Compensate.
  virtual absl::Status DivideAll(float* x, int64_t n, float divisor) = 0;
  // Σ x[i]² accumulated in double in a fixed order (kernels/cpu/sum_squares.h), where x lives:
  // the norms the policy reports, without copying the tensor to the host.
  virtual absl::StatusOr<double> SumSquares(const float* x, int64_t n) = 0;
  // Waits for the queued work; reports the errors it latched.
  virtual absl::Status Synchronize() = 0;
};

// The backend for buffers of memory type `type`: the CPU backend for kHost (device ignored; `pool`,
// not owned and may be null, parallelises its top-k), the CUDA backend on CUDA device `device`
// for kDevice. kFailedPrecondition naming the memory type
// when gravac was built without CUDA or the device cannot be used (the caller then stages the
// tensor through host memory); kInvalidArgument for a negative device with kDevice.
absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeCompressionBackend(
    MemoryType type, int device, ThreadPool* pool = nullptr);

// Makes the compression backend of CUDA device `device` (>= 0), e.g. MakeDeviceBackend; tests
// pass fakes. An error: the device has none.
using DeviceBackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<CompressionBackend>>(int device)>;

// The CUDA backend alone (kernels/cuda/backend.cc; in a build without CUDA,
// device_backend_none.cc, which always fails with kFailedPrecondition).
absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeDeviceBackend(int device);

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_BACKEND_H_

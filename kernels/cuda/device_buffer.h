// DeviceBuffer<T>: an owning, move-only array in device memory, plus device discovery.
//
//   ASSIGN_OR_RETURN(DeviceBuffer<float> buf, DeviceBuffer<float>::Create(n));
//   RETURN_IF_ERROR(buf.Upload(host_span));     // blocking copy host -> device
//   RETURN_IF_ERROR(buf.Download(host_span));   // blocking copy device -> host
//
// Create(0) makes an empty buffer with data() == nullptr (no allocation). Upload/Download copy
// min(size(), span.size()) elements with cudaMemcpy, so they wait for all prior work on the
// legacy default stream (and streams that synchronise with it). The destructor frees with
// cudaFree, which may synchronise the device; its error is dropped (nothing can be done there).
//
// DeviceCount() returns the number of usable CUDA devices; a missing driver or device is
// reported as FailedPrecondition with CUDA's own description, so callers (tests, benchmarks) can
// print why they skip.
//
// Thread-safety: a DeviceBuffer is a plain owning value; DeviceCount is safe from any thread.
#ifndef GRAVAC_KERNELS_CUDA_DEVICE_BUFFER_H_
#define GRAVAC_KERNELS_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "core/cuda/cuda_status.h"

namespace gravac::kernels::cuda {

inline absl::StatusOr<int> DeviceCount() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // reset the runtime's last-error state for later calls
    return absl::FailedPreconditionError(
        absl::StrFormat("no usable CUDA device: cudaGetDeviceCount failed: %s (%s)",
                        cudaGetErrorName(error), cudaGetErrorString(error)));
  }
  if (count <= 0) return absl::FailedPreconditionError("no CUDA device present");
  return count;
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  static absl::StatusOr<DeviceBuffer> Create(int64_t size) {
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("DeviceBuffer size %d < 0", size));
    }
    DeviceBuffer buffer;
    if (size > 0) {
      void* ptr = nullptr;
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, static_cast<size_t>(size) * sizeof(T)));
      buffer.data_ = static_cast<T*>(ptr);
      buffer.size_ = size;
    }
    return buffer;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }

  absl::Status Upload(absl::Span<const T> host) {
    size_t count = std::min(static_cast<size_t>(size_), host.size());
    if (count == 0) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(data_, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }

  absl::Status Download(absl::Span<T> host) const {
    size_t count = std::min(static_cast<size_t>(size_), host.size());
    if (count == 0) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(host.data(), data_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_DEVICE_BUFFER_H_

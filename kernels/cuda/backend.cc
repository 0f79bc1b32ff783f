#include "kernels/cuda/backend.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "core/status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/error_feedback.h"
#include "kernels/cuda/scatter_add.h"
#include "kernels/cuda/select.h"
#include "kernels/cuda/sum_squares.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {
namespace {

// Makes `device` current for its lifetime and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  absl::Status status() const {
    return gravac::cuda::CudaErrorToStatus(status_, "cudaSetDevice", __FILE__, __LINE__);
  }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

class DeviceMemory : public BackendMemory {
 public:
  DeviceMemory(int device, void* data, size_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}
  ~DeviceMemory() override {
    if (data_ == nullptr) return;
    DeviceGuard on(device_);
    cudaFree(data_);
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  int device_;
  void* data_;
  size_t bytes_;
};

class CudaBackend : public CompressionBackend {
 public:
  CudaBackend(int device, cudaStream_t stream, std::unique_ptr<Workspace> ws,
              DeviceBuffer<double> lanes)
      : device_(device), stream_(stream), ws_(std::move(ws)), lanes_(std::move(lanes)) {}
  ~CudaBackend() override {
    DeviceGuard on(device_);
    cudaStreamSynchronize(stream_);
    ws_.reset();
    lanes_ = DeviceBuffer<double>();
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return "cuda"; }
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  int device() const override { return device_; }

  absl::StatusOr<std::unique_ptr<BackendMemory>> Allocate(size_t bytes) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    void* data = nullptr;
    if (bytes > 0) {
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes));
      auto memory = std::make_unique<DeviceMemory>(device_, data, bytes);
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data, 0, bytes, stream_));
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      return memory;
    }
    return std::make_unique<DeviceMemory>(device_, nullptr, 0);
  }
  absl::Status CopyFromHost(void* dst, const void* host, size_t bytes) override {
    return Copy(dst, host, bytes, cudaMemcpyHostToDevice);
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes) override {
    return Copy(host, src, bytes, cudaMemcpyDeviceToHost);
  }

  absl::Status CopyWithin(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    GRAVAC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }

  absl::Status Zero(void* dst, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_));
    return absl::OkStatus();
  }

  absl::Status Compensate(const float* grad, const float* residual, float* p, int64_t n) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return cuda::Compensate(grad, residual, p, n, stream_);
  }
  absl::Status TopK(const float* p, int64_t n, int64_t k, int32_t* indices,
                    float* values) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return cuda::TopK(p, n, k, ws_.get(), indices, values, stream_);
  }
  absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                              const float* values, int64_t k, float* residual) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return cuda::UpdateResidual(p, n, indices, values, k, ws_.get(), residual, stream_);
  }
  absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k, float scale,
                          float* out, int64_t n) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return cuda::ScatterAdd(indices, values, k, scale, ws_.get(), out, n, stream_);
  }
  absl::Status DivideAll(float* x, int64_t n, float divisor) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return cuda::DivideAll(x, n, divisor, ws_.get(), stream_);
  }
  absl::StatusOr<double> SumSquares(const float* x, int64_t n) override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    double result = 0.0;
    RETURN_IF_ERROR(cuda::SumSquares(x, n, lanes_.data(), &result, stream_));
    RETURN_IF_ERROR(ws_->Synchronize(stream_));  // errors latched by earlier launches
    return result;
  }
  absl::Status Synchronize() override {
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    return ws_->Synchronize(stream_);
  }

 private:
  absl::Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return absl::OkStatus();
    DeviceGuard on(device_);
    RETURN_IF_ERROR(on.status());
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    return ws_->Synchronize(stream_);
  }

  int device_;
  cudaStream_t stream_;
  std::unique_ptr<Workspace> ws_;
  DeviceBuffer<double> lanes_;  // SumSquares' scratch
};

}  // namespace

absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeCudaBackend(int device) {
  ASSIGN_OR_RETURN(int count, DeviceCount());
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CUDA device %d does not exist (this process sees %d devices)", device, count));
  }
  DeviceGuard on(device);
  RETURN_IF_ERROR(on.status());
  cudaStream_t stream = nullptr;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  absl::StatusOr<std::unique_ptr<Workspace>> ws = Workspace::Create();
  absl::StatusOr<DeviceBuffer<double>> lanes = DeviceBuffer<double>::Create(kSumSquaresLanes);
  if (!ws.ok() || !lanes.ok()) {
    cudaStreamDestroy(stream);
    return !ws.ok() ? ws.status() : lanes.status();
  }
  return std::unique_ptr<CompressionBackend>(
      new CudaBackend(device, stream, *std::move(ws), *std::move(lanes)));
}

}  // namespace gravac::kernels::cuda

namespace gravac::kernels {

absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeDeviceBackend(int device) {
  return cuda::MakeCudaBackend(device);
}

}  // namespace gravac::kernels

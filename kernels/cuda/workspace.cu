#include <cuda_runtime.h>

#include <cstring>
#include <cub/device/device_scan.cuh>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {

absl::StatusOr<std::unique_ptr<Workspace>> Workspace::Create() {
  std::unique_ptr<Workspace> ws(new Workspace());
  absl::Status status = ws->Init();
  if (!status.ok()) return status;
  return ws;
}

absl::Status Workspace::Init() {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device_));
  int sms = 0;
  int threads_per_sm = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device_));
  resident_blocks_ = std::max(1, sms * std::max(1, threads_per_sm / internal::kTileThreads));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&state_, sizeof(internal::DeviceState)));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host_state_, sizeof(internal::DeviceState)));
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&histogram_, internal::kMaxHistogramBins * sizeof(unsigned int)));
  // Blocking memset on a fresh allocation: no latched error to begin with.
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemset(state_, 0xff, internal::kErrorBytes));
  return absl::OkStatus();
}

Workspace::~Workspace() {
  // Frees synchronise with outstanding work on the device; errors cannot be reported here.
  cudaFree(scan_temp_);
  cudaFree(tile_inclusive_);
  cudaFree(tile_counts_);
  cudaFree(histogram_);
  cudaFreeHost(host_state_);
  cudaFree(state_);
}

absl::Status Workspace::Reserve(int64_t n, cudaStream_t stream) {
  if (n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Workspace::Reserve: %d elements outside [0, %d]", n, kMaxElements));
  }
  int64_t tiles = (n + internal::kTileElements - 1) / internal::kTileElements;
  if (tiles <= tile_capacity_) return absl::OkStatus();
  size_t temp_bytes = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(
      nullptr, temp_bytes, tile_counts_, tile_inclusive_, static_cast<int>(tiles), stream));
  // The old buffers may still be read by work queued on `stream`.
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  cudaFree(scan_temp_);
  cudaFree(tile_inclusive_);
  cudaFree(tile_counts_);
  scan_temp_ = nullptr;
  tile_inclusive_ = nullptr;
  tile_counts_ = nullptr;
  tile_capacity_ = 0;
  scan_temp_bytes_ = 0;
  size_t bytes = static_cast<size_t>(tiles) * sizeof(unsigned long long);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&tile_counts_, bytes));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&tile_inclusive_, bytes));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(&scan_temp_, std::max<size_t>(temp_bytes, 1)));
  scan_temp_bytes_ = std::max<size_t>(temp_bytes, 1);
  tile_capacity_ = tiles;
  return absl::OkStatus();
}

absl::Status Workspace::Synchronize(cudaStream_t stream) {
  return Finish(stream, "Synchronize", nullptr);
}

absl::Status Workspace::Finish(cudaStream_t stream, std::string_view kernel,
                               internal::DeviceState* host_state) {
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_state_, state_, sizeof(internal::DeviceState),
                                              cudaMemcpyDeviceToHost, stream));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state_, 0xff, internal::kErrorBytes, stream));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const internal::DeviceState& s = *host_state_;
  auto position = [](unsigned long long word) { return static_cast<int64_t>(word >> 32); };
  auto payload = [](unsigned long long word) { return static_cast<uint32_t>(word & 0xffffffffu); };
  if (s.nonfinite != internal::kNoError) {
    uint32_t bits = payload(s.nonfinite);
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: non-finite value %f at index %d (NaN or Inf in the input)", kernel,
                        value, position(s.nonfinite)));
  }
  if (s.scatter_bad_index != internal::kNoError) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ScatterAdd: indices[%d] = %d is outside the output", position(s.scatter_bad_index),
        static_cast<int32_t>(payload(s.scatter_bad_index))));
  }
  if (s.residual_bad_index != internal::kNoError) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "UpdateResidual: indices[%d] = %d is outside the residual", position(s.residual_bad_index),
        static_cast<int32_t>(payload(s.residual_bad_index))));
  }
  if (host_state != nullptr) *host_state = s;
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cuda

#include <cuda_runtime.h>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/scatter_add.h"

namespace gravac::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    ScatterAddKernel(const int32_t* __restrict__ indices, const float* __restrict__ values,
                     long long k, float scale, float* out, long long n,
                     unsigned long long* bad_index) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long j = blockIdx.x * kThreads + threadIdx.x; j < k; j += stride) {
    int32_t index = indices[j];
    if (index < 0 || index >= n) {
      internal::Latch(bad_index, j, static_cast<unsigned int>(index));
      continue;
    }
    internal::ExactAtomicAdd(&out[index], __fmul_rn(scale, values[j]));
  }
}

__global__ void __launch_bounds__(kThreads) DivideAllKernel(float* x, long long n, float divisor) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = blockIdx.x * kThreads + threadIdx.x; i < n; i += stride) {
    x[i] = __fdiv_rn(x[i], divisor);
  }
}

}  // namespace

absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k, float scale,
                        Workspace* ws, float* out, int64_t n, cudaStream_t stream) {
  if (k < 0 || k > kMaxElements || n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ScatterAdd: k = %d and n = %d must be in [0, %d]", k, n, kMaxElements));
  }
  if (ws == nullptr) return absl::InvalidArgumentError("ScatterAdd: null workspace");
  if (k == 0) return absl::OkStatus();
  if (indices == nullptr || values == nullptr || (n > 0 && out == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ScatterAdd: null pointer with k = %d, n = %d", k, n));
  }
  int blocks = internal::StreamingBlocks(k, kThreads, ws->resident_blocks());
  ScatterAddKernel<<<blocks, kThreads, 0, stream>>>(indices, values, k, scale, out, n,
                                                    &ws->state()->scatter_bad_index);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status DivideAll(float* x, int64_t n, float divisor, Workspace* ws, cudaStream_t stream) {
  if (n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DivideAll: n = %d must be in [0, %d]", n, kMaxElements));
  }
  if (ws == nullptr) return absl::InvalidArgumentError("DivideAll: null workspace");
  if (n == 0) return absl::OkStatus();
  if (x == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("DivideAll: null x, n = %d", n));
  }
  const int blocks = internal::StreamingBlocks(n, kThreads, ws->resident_blocks());
  DivideAllKernel<<<blocks, kThreads, 0, stream>>>(x, n, divisor);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cuda

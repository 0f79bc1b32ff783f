#include <cuda_runtime.h>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/error_feedback.h"

namespace gravac::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kMaxBlocks = 1 << 16;

__global__ void __launch_bounds__(kThreads)
    CompensateKernel(const float* grad, const float* residual, float* p, long long n) {
  const long long chunk = static_cast<long long>(kThreads) * kUnroll;
  const long long stride = static_cast<long long>(gridDim.x) * chunk;
  for (long long base = blockIdx.x * chunk; base < n; base += stride) {
    float g[kUnroll];
    float e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      long long i = base + u * kThreads + threadIdx.x;
      g[u] = i < n ? grad[i] : 0.0f;
      e[u] = i < n ? residual[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      long long i = base + u * kThreads + threadIdx.x;
      if (i < n) p[i] = __fadd_rn(g[u], e[u]);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    SubtractSentKernel(const int32_t* __restrict__ indices, const float* __restrict__ sent,
                       long long k, long long n, float* residual, unsigned long long* bad_index) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long j = blockIdx.x * kThreads + threadIdx.x; j < k; j += stride) {
    int32_t index = indices[j];
    if (index < 0 || index >= n) {
      internal::Latch(bad_index, j, static_cast<unsigned int>(index));
      continue;
    }
    internal::ExactAtomicAdd(&residual[index], -sent[j]);  // e - s == e + (-s) exactly
  }
}

absl::Status CheckCount(const char* kernel, const char* what, int64_t count) {
  if (count < 0 || count > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s = %d outside [0, %d]", kernel, what, count, kMaxElements));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Compensate(const float* grad, const float* residual, float* p, int64_t n,
                        cudaStream_t stream) {
  if (absl::Status s = CheckCount("Compensate", "n", n); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  if (grad == nullptr || residual == nullptr || p == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("Compensate: null pointer with n = %d", n));
  }
  int blocks = internal::StreamingBlocks(n, int64_t{kThreads} * kUnroll, kMaxBlocks);
  CompensateKernel<<<blocks, kThreads, 0, stream>>>(grad, residual, p, n);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                            const float* sent_values, int64_t k, Workspace* ws, float* residual,
                            cudaStream_t stream) {
  if (absl::Status s = CheckCount("UpdateResidual", "n", n); !s.ok()) return s;
  if (absl::Status s = CheckCount("UpdateResidual", "k", k); !s.ok()) return s;
  if (ws == nullptr) return absl::InvalidArgumentError("UpdateResidual: null workspace");
  if (n > 0 && (p == nullptr || residual == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("UpdateResidual: null p or residual with n = %d", n));
  }
  if (k > 0 && (indices == nullptr || sent_values == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("UpdateResidual: null indices or values with k = %d", k));
  }
  if (n > 0 && residual != p) {
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(residual, p, static_cast<size_t>(n) * sizeof(float),
                                                cudaMemcpyDeviceToDevice, stream));
  }
  if (k == 0) return absl::OkStatus();
  int blocks = internal::StreamingBlocks(k, kThreads, ws->resident_blocks());
  SubtractSentKernel<<<blocks, kThreads, 0, stream>>>(indices, sent_values, k, n, residual,
                                                      &ws->state()->residual_bad_index);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cuda

#include <cuda_runtime.h>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/sum_squares.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {
namespace {

constexpr int kLaneThreads = 256;
constexpr int kTreeThreads = 1024;
static_assert(kSumSquaresLanes % kLaneThreads == 0);

// Lane t sums x[t], x[t + L], x[t + 2L], ... in ascending order (L = kSumSquaresLanes).
__global__ void __launch_bounds__(kLaneThreads)
    LaneSumsKernel(const float* __restrict__ x, long long n, double* lanes) {
  const long long t = static_cast<long long>(blockIdx.x) * kLaneThreads + threadIdx.x;
  double acc = 0.0;
  for (long long i = t; i < n; i += kSumSquaresLanes) {
    const double v = x[i];
    acc = __dadd_rn(acc, __dmul_rn(v, v));
  }
  lanes[t] = acc;
}

// lane[t] += lane[t + s] for s = L/2, ..., 1, one level at a time (one block).
__global__ void __launch_bounds__(kTreeThreads) LaneTreeKernel(double* lanes) {
  for (long long s = kSumSquaresLanes / 2; s >= 1; s /= 2) {
    for (long long t = threadIdx.x; t < s; t += kTreeThreads) {
      lanes[t] = __dadd_rn(lanes[t], lanes[t + s]);
    }
    __syncthreads();
  }
}

}  // namespace

absl::Status SumSquares(const float* x, int64_t n, double* lanes, double* result,
                        cudaStream_t stream) {
  if (n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SumSquares: n = %d outside [0, %d]", n, kMaxElements));
  }
  if ((n > 0 && x == nullptr) || lanes == nullptr || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("SumSquares: null pointer with n = %d", n));
  }
  LaneSumsKernel<<<kSumSquaresLanes / kLaneThreads, kLaneThreads, 0, stream>>>(x, n, lanes);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  LaneTreeKernel<<<1, kTreeThreads, 0, stream>>>(lanes);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(result, lanes, sizeof(double), cudaMemcpyDeviceToHost, stream));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cuda

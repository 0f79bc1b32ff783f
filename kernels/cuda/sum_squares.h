// CUDA twin of kernels/cpu/sum_squares.h: Σ x[i]² in double in the same lane-and-tree order, so
// the result equals the CPU's bit for bit (products exact in double, every addition rounded to
// nearest, never fused).
//
// SumSquares(x, n, lanes, result, stream)
//   x: n floats of device memory (0 <= n <= kMaxElements; null only when n == 0); lanes: device
//   scratch of kSumSquaresLanes doubles. Enqueues on `stream`, then synchronises it and writes
//   the sum to *result (host).
//
// Thread-safety: as the scratch passed in (one caller per `lanes`).
#ifndef GRAVAC_KERNELS_CUDA_SUM_SQUARES_H_
#define GRAVAC_KERNELS_CUDA_SUM_SQUARES_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/sum_squares.h"

namespace gravac::kernels::cuda {

absl::Status SumSquares(const float* x, int64_t n, double* lanes, double* result,
                        cudaStream_t stream);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_SUM_SQUARES_H_

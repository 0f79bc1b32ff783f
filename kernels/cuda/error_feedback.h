// CUDA error-feedback kernels (GRAVAC.md "Error feedback"): one residual e per tensor,
// p = g + e before compression, then e = p - decompress(sent). CPU twins (bit for bit):
// CompensateKernel / UpdateResidualKernel in kernels/cpu/error_feedback.h.
//
// Compensate(grad, residual, p, n, stream)
//   p[i] = grad[i] + residual[i] (round to nearest, never fused). p may alias grad or residual.
// UpdateResidual(p, n, indices, sent_values, k, ws, residual, stream)
//   residual = p (skipped when residual == p), then residual[indices[j]] -= sent_values[j] for
//   j < k. So a top-k step leaves exact zeros where values were sent. Indices outside [0, n) are
//   skipped and latched in `ws`: the next synchronising call on `ws` (Workspace::Synchronize,
//   TopK, ...) reports InvalidArgument naming the lowest bad position. Repeated indices are all
//   applied (atomically), in an unspecified order.
//
// Both take device pointers, enqueue on `stream` and never synchronise; they return an error only
// for bad arguments (checked on the host) or a failed launch. n and k must fit int32 indices.
//
// Thread-safety: Compensate is stateless; UpdateResidual as the Workspace passed in.
#ifndef GRAVAC_KERNELS_CUDA_ERROR_FEEDBACK_H_
#define GRAVAC_KERNELS_CUDA_ERROR_FEEDBACK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {

absl::Status Compensate(const float* grad, const float* residual, float* p, int64_t n,
                        cudaStream_t stream);

absl::Status UpdateResidual(const float* p, int64_t n, const int32_t* indices,
                            const float* sent_values, int64_t k, Workspace* ws, float* residual,
                            cudaStream_t stream);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_ERROR_FEEDBACK_H_

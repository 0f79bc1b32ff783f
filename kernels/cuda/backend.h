// CudaBackend: the CompressionBackend (kernels/backend.h) for the memory of one CUDA device,
// over the CUDA twins of the CPU kernels (select.h, error_feedback.h, scatter_add.h,
// sum_squares.h). It owns a non-blocking stream and a Workspace on its device; every call makes
// that device current and restores the caller's. Compensate, UpdateResidual and ScatterAdd are
// queued on the stream; TopK, SumSquares, the copies and Synchronize wait for it.
//
// Thread-safety: as CompressionBackend (one owner).
#ifndef GRAVAC_KERNELS_CUDA_BACKEND_H_
#define GRAVAC_KERNELS_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace gravac::kernels::cuda {

// kFailedPrecondition when there is no usable CUDA device; kInvalidArgument when `device` is not
// one of them.
absl::StatusOr<std::unique_ptr<CompressionBackend>> MakeCudaBackend(int device);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_BACKEND_H_

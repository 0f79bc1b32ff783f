// CUDA error conversion: the one place where a cudaError_t becomes an absl::Status.
//
//   GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
//
// returns from the enclosing function (which must return absl::Status or absl::StatusOr<T>) with
// a Status whose message keeps the failing call's text, the CUDA error name and description, and
// file:line. CudaErrorToStatus is the same conversion as a function (cudaSuccess -> OK).
// Codes: cudaErrorMemoryAllocation -> ResourceExhausted; invalid values/handles -> InvalidArgument;
// no device / no driver -> FailedPrecondition; everything else -> Internal.
//
// Thread-safety: stateless. Note that cudaGetLastError() is *not* called here: a launch is checked
// with GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError()) right after the <<<>>> by the launcher.
#ifndef GRAVAC_CORE_CUDA_CUDA_STATUS_H_
#define GRAVAC_CORE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gravac::cuda {

inline absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidConfiguration:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// `call` is the source text of the failing expression; file/line where it was made.
inline absl::Status CudaErrorToStatus(cudaError_t error, std::string_view call, const char* file,
                                      int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::Status(CudaErrorCode(error),
                      absl::StrFormat("%s failed: %s (%s) at %s:%d", call, cudaGetErrorName(error),
                                      cudaGetErrorString(error), file, line));
}

}  // namespace gravac::cuda

#define GRAVAC_CUDA_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                       \
    const cudaError_t gravac_cuda_error_ = (expr);                                           \
    if (gravac_cuda_error_ != cudaSuccess) {                                                 \
      return ::gravac::cuda::CudaErrorToStatus(gravac_cuda_error_, #expr, __FILE__, \
                                                        __LINE__);                           \
    }                                                                                        \
  } while (false)

#endif  // GRAVAC_CORE_CUDA_CUDA_STATUS_H_

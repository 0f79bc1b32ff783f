// CUDA scatter-add, the decompression step of a sparse message: out[indices[j]] += scale *
// values[j] for j < k. CPU twin (bit for bit): ScatterAdd in kernels/cpu/scatter_add.h.
//
// ScatterAdd(indices, values, k, scale, ws, out, n, stream)
//   Each update is out = out + (scale * value), both operations rounded to nearest (never fused
//   into an FMA, and without the subnormal flush of float atomicAdd). Repeated indices are all
//   applied atomically, in an unspecified order (so bit-exactness with the CPU holds for distinct
//   indices, as in every Compressed). Indices outside [0, n) are skipped and latched in `ws`: the
//   next synchronising call on `ws` reports InvalidArgument naming the lowest bad position.
//   Device pointers; enqueues on `stream`, never synchronises; host-side checks only (null
//   pointers, k or n outside [0, 2^31 - 1]).
//
// Thread-safety: as the Workspace passed in.
#ifndef GRAVAC_KERNELS_CUDA_SCATTER_ADD_H_
#define GRAVAC_KERNELS_CUDA_SCATTER_ADD_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {

absl::Status ScatterAdd(const int32_t* indices, const float* values, int64_t k, float scale,
                        Workspace* ws, float* out, int64_t n, cudaStream_t stream);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_SCATTER_ADD_H_

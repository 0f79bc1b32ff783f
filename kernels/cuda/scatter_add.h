// CUDA scatter-add, the decompression step of a sparse message: out[indices[j]] += scale *
// values[j] for j < k, and the division of an average (DivideAll). CPU twins (bit for bit):
// ScatterAdd and DivideAll in kernels/cpu/scatter_add.h.
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
// DivideAll(x, n, divisor, ws, stream)
//   x[i] = x[i] / divisor with __fdiv_rn (IEEE division rounded to nearest, the same bits as the
//   CPU twin kernels::cpu::DivideAll): the division of an average. Device pointer; enqueues on
//   `stream`; host-side checks only (null pointer, n outside [0, 2^31 - 1]).
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

absl::Status DivideAll(float* x, int64_t n, float divisor, Workspace* ws, cudaStream_t stream);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_SCATTER_ADD_H_

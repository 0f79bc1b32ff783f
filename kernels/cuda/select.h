// CUDA selection kernels: exact top-k by magnitude, threshold filter and count, over fp32 tensors
// in device memory. CPU twins (same results, bit for bit): kernels/cpu/select.h.
//
// TopK(input, n, k, ws, indices, values, stream)
//   Writes exactly min(k, n) (index, value) pairs of the largest |input[i]| (k < 0 is
//   InvalidArgument; k > n keeps all n, as the CPU twin). Indices strictly ascending, values
//   copied bitwise (signed); among equal magnitudes the lower index wins, so the result equals a
//   stable sort by |x| descending, first k, re-sorted by index. -0 and +0 tie.
//   Method: radix select over the 31 magnitude bits (3 histogram passes of 11/10/10 bits,
//   block histograms in shared memory combined in global memory), then a tile count, a scan and
//   an order-preserving compaction that skips tiles with nothing to keep.
// ThresholdFilter(input, n, threshold, ws, capacity, indices, values, count, stream)
//   Keeps |input[i]| >= threshold, ascending indices; *count is the number that pass. When it
//   exceeds `capacity`, the lowest `capacity` of them are written and OutOfRange is returned.
// CountAtLeast(input, n, threshold, ws, count, stream): *count = #{i : |input[i]| >= threshold}.
//
// All three:
//  - take device pointers (indices/values need room for min(k, n), resp. capacity, elements;
//    they may be null when that is 0), 0 <= n <= kMaxElements, and enqueue on `stream`;
//  - reject NaN or ±Inf in the input with InvalidArgument naming the lowest bad index (detected
//    on the device); a NaN or infinite threshold is InvalidArgument (a threshold <= 0 keeps
//    everything). On error the outputs are unspecified. (The CPU CountAtLeast checks neither:
//    it assumes finite input and counts none for a NaN threshold.)
//  - synchronise `stream` once at the end (they must, to report errors and counts), which also
//    reports errors latched in `ws` by earlier asynchronous launches (see workspace.h);
//  - may grow `ws` (see Workspace::Reserve).
//
// Thread-safety: as the Workspace passed in (one caller, one stream per workspace).
#ifndef GRAVAC_KERNELS_CUDA_SELECT_H_
#define GRAVAC_KERNELS_CUDA_SELECT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/workspace.h"

namespace gravac::kernels::cuda {

absl::Status TopK(const float* input, int64_t n, int64_t k, Workspace* ws, int32_t* indices,
                  float* values, cudaStream_t stream);

absl::Status ThresholdFilter(const float* input, int64_t n, float threshold, Workspace* ws,
                             int64_t capacity, int32_t* indices, float* values, int64_t* count,
                             cudaStream_t stream);

absl::Status CountAtLeast(const float* input, int64_t n, float threshold, Workspace* ws,
                          int64_t* count, cudaStream_t stream);

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_SELECT_H_

// Device helpers shared by the .cu files of kernels/cuda/ (internal; include only from .cu).
//
//  - MagnitudeKey(bits): the fp32 magnitude as an unsigned key; for finite x, |a| < |b| exactly
//    when key(a) < key(b), and key >= kNonFiniteKey exactly when x is NaN or ±Inf.
//  - Latch(word, position, payload): records an error as (position << 32) | payload with
//    atomicMin, so the lowest position wins (see Workspace).
//  - ExactAtomicAdd(addr, v): *addr = *addr + v rounded to nearest even, without flushing
//    subnormals (float atomicAdd flushes them to zero), via a compare-and-swap loop.
//  - StreamingBlocks(n, per_block, ws_blocks): grid size for grid-stride kernels, >= 1.
//
// Arithmetic in these kernels uses __fadd_rn/__fmul_rn so that nvcc never contracts a*b+c into
// an FMA: results must equal the CPU twins bit for bit.
#ifndef GRAVAC_KERNELS_CUDA_DEVICE_UTIL_CUH_
#define GRAVAC_KERNELS_CUDA_DEVICE_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace gravac::kernels::cuda::internal {

inline constexpr unsigned int kMagnitudeMask = 0x7fffffffu;
inline constexpr unsigned int kNonFiniteKey = 0x7f800000u;

__device__ __forceinline__ unsigned int MagnitudeKey(unsigned int bits) {
  return bits & kMagnitudeMask;
}

__device__ __forceinline__ void Latch(unsigned long long* word, long long position,
                                      unsigned int payload) {
  atomicMin(word, (static_cast<unsigned long long>(position) << 32) | payload);
}

__device__ __forceinline__ void ExactAtomicAdd(float* addr, float v) {
  unsigned int* word = reinterpret_cast<unsigned int*>(addr);
  unsigned int old = *word;
  unsigned int assumed;
  do {
    assumed = old;
    old = atomicCAS(word, assumed, __float_as_uint(__fadd_rn(__uint_as_float(assumed), v)));
  } while (old != assumed);
}

inline int StreamingBlocks(int64_t n, int64_t per_block, int max_blocks) {
  int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks > max_blocks) blocks = max_blocks;
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

}  // namespace gravac::kernels::cuda::internal

#endif  // GRAVAC_KERNELS_CUDA_DEVICE_UTIL_CUH_

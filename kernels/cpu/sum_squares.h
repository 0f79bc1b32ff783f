// SumSquares: Σ x[i]² in double, in an order a GPU can follow exactly, so that the CUDA twin
// (kernels/cuda/sum_squares.h) returns the same double bit for bit. Each of kSumSquaresLanes
// lanes t sums (double)x[i] * x[i] over i ≡ t (mod kSumSquaresLanes) in ascending i (the products
// are exact in double); then the lanes are added pairwise: for s = kSumSquaresLanes / 2, ..., 1,
// lane[t] += lane[t + s] for t < s; the result is lane[0]. A non-finite element makes the sum
// Inf or NaN. (kernels::L2Norm, which the CPU engine uses, sums in another order.)
//
// Thread-safety: stateless.
#ifndef GRAVAC_KERNELS_CPU_SUM_SQUARES_H_
#define GRAVAC_KERNELS_CPU_SUM_SQUARES_H_

#include <cstdint>

#include "absl/types/span.h"

namespace gravac::kernels {

inline constexpr int64_t kSumSquaresLanes = 32768;  // a power of two

namespace cpu {

double SumSquares(absl::Span<const float> x);

}  // namespace cpu
}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_CPU_SUM_SQUARES_H_

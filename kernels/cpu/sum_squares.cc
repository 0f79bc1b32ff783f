#include "kernels/cpu/sum_squares.h"

#include <vector>

namespace gravac::kernels::cpu {

double SumSquares(absl::Span<const float> x) {
  std::vector<double> lane(kSumSquaresLanes, 0.0);
  const size_t n = x.size();
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    lane[i & (kSumSquaresLanes - 1)] += v * v;
  }
  for (int64_t s = kSumSquaresLanes / 2; s >= 1; s /= 2) {
    for (int64_t t = 0; t < s; ++t) lane[t] += lane[t + s];
  }
  return lane[0];
}

}  // namespace gravac::kernels::cpu

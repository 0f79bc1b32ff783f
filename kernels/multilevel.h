// Multi-level compression of one tensor at one step, and the L2 norms GraVAC measures.
//
// CompressMultiLevel(C, p, θ_min, θ_c, ctx, r) runs C once over the full (error-compensated)
// tensor p at θ_min, then C.CompressFrom(r.at_min, θ_c) to get the candidate from that output
// (GRAVAC.md "Multi-level compression"), and fills the norms of both results. It requires
// 1 <= θ_min <= θ_c (the second level compresses at least as much as the first). For topk and
// randomk the candidate equals C.Compress(p, θ_c); dense casts return the same output twice.
//
// L2Norm returns sqrt(Σ x²) accumulated in double; for a Compressed it runs over the values (the
// dense norm of its decompression).
//
// Thread-safety: the functions are stateless; CompressMultiLevel uses the Compressor, which must
// not be used by another thread at the same time.
#ifndef GRAVAC_KERNELS_MULTILEVEL_H_
#define GRAVAC_KERNELS_MULTILEVEL_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"

namespace gravac::kernels {

double L2Norm(absl::Span<const float> values);
double L2Norm(const Compressed& c);

struct MultiLevelResult {
  Compressed at_min;
  Compressed at_candidate;
  double norm_min = 0.0;
  double norm_candidate = 0.0;
};

absl::Status CompressMultiLevel(Compressor& compressor, absl::Span<const float> p, double theta_min,
                                double theta_c, const CompressContext& ctx,
                                MultiLevelResult* result);

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_MULTILEVEL_H_

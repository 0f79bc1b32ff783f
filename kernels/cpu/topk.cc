#include "kernels/cpu/topk.h"

#include "core/status.h"

namespace gravac::kernels::cpu {

TopKCompressor::TopKCompressor(const CompressorOptions& options)
    : options_(options), selector_(options.pool) {}

absl::Status TopKCompressor::Compress(absl::Span<const float> input, double theta,
                                      const CompressContext& ctx, Compressed* out) {
  selector_.ResetStats();
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckCompressArgs(n, theta, ctx.tensor_name));
  PrepareSparseOutput(n, options_.value_type, out);
  RETURN_IF_ERROR(
      selector_.TopK(input, KeepCount(n, theta), ctx.tensor_name, &out->indices, &out->values));
  return FinishSparseOutput(ctx.tensor_name, out);
}

absl::Status TopKCompressor::CompressFrom(const Compressed& first, double theta,
                                          const CompressContext& ctx, Compressed* out) {
  return SelectFrom(first, theta, ctx, out);
}

}  // namespace gravac::kernels::cpu

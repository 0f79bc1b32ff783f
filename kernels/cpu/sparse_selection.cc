#include "kernels/cpu/sparse_selection.h"

#include <utility>

#include "core/status.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/selection_output.h"

namespace gravac::kernels::cpu {

SparseSelectionCompressor::SparseSelectionCompressor(std::string_view name,
                                                     const CompressorOptions& options,
                                                     std::unique_ptr<ThresholdRule> rule)
    : name_(name), options_(options), rule_(std::move(rule)), selector_(options.pool) {}

absl::Status SparseSelectionCompressor::Compress(absl::Span<const float> input, double theta,
                                                 const CompressContext& ctx, Compressed* out) {
  selector_.ResetStats();
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckCompressArgs(n, theta, ctx.tensor_name));
  PrepareSparseOutput(n, options_.value_type, out);
  RETURN_IF_ERROR(Select(input, KeepCount(n, theta), ctx.tensor_name, out));
  return FinishSparseOutput(ctx.tensor_name, out);
}

absl::Status SparseSelectionCompressor::CompressFrom(const Compressed& first, double theta,
                                                     const CompressContext& ctx, Compressed* out) {
  return SelectFrom(first, theta, ctx, out);
}

absl::Status SparseSelectionCompressor::Select(absl::Span<const float> input, int64_t k,
                                               std::string_view tensor_name, Compressed* out) {
  const int64_t n = static_cast<int64_t>(input.size());
  if (rule_ == nullptr || k >= n) {
    return selector_.TopK(input, k, tensor_name, &out->indices, &out->values);
  }
  if (!selector_.Sample(input, rule_->SampleStride(n), Selector::kSampleChunk, &sample_)) {
    return CheckInput(input, tensor_name, selector_.pool());
  }
  const uint32_t cut = rule_->Cut(selector_, sample_, n, k);
  const int64_t budget = 4 * k + 4096;
  selector_.Gather(input, cut, budget, budget, rule_->SumsAbs(), &set_);
  if (set_.first_bad >= 0) {
    return NonFiniteError(tensor_name, set_.first_bad, input[set_.first_bad]);
  }
  const bool complete = set_.above_complete && set_.ties_complete;
  if (complete) counter_.Reset(set_);
  ThresholdProbe probe(&selector_, input, set_, &counter_, complete);
  const ThresholdChoice choice = rule_->Choose(set_, probe, n, k);
  if (choice.keep_at_least) {
    if (set_.Holds(choice.key)) {
      selector_.EmitAtLeast(set_, choice.key, &out->indices, &out->values, choice.count);
      return absl::OkStatus();
    }
    return selector_.FilterAtLeast(input, choice.key, tensor_name, &out->indices, &out->values);
  }
  if (choice.fallback) selector_.MarkFallback();
  if (complete && set_.count() >= k) {
    selector_.EmitTopK(set_, k, &out->indices, &out->values);
    return absl::OkStatus();
  }
  return selector_.TopK(input, k, tensor_name, &out->indices, &out->values);
}

}  // namespace gravac::kernels::cpu

#include "kernels/cpu/error_feedback.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::kernels::cpu {

void CompensateKernel(absl::Span<const float> grad, absl::Span<const float> residual,
                      absl::Span<float> p) {
  const size_t n = p.size();
  const float* g = grad.data();
  const float* e = residual.data();
  float* out = p.data();
  for (size_t i = 0; i < n; ++i) out[i] = g[i] + e[i];
}

double CompensateAndNormKernel(absl::Span<const float> grad, absl::Span<const float> residual,
                               absl::Span<float> p) {
  const size_t n = p.size();
  const float* g = grad.data();
  const float* e = residual.data();
  float* out = p.data();
  // The accumulation order of kernels::L2Norm (four lanes, then the tail into lane 0).
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t j = 0; j < 4; ++j) {
      const double x = g[i + j];
      acc[j] += x * x;
      out[i + j] = g[i + j] + e[i + j];
    }
  }
  for (; i < n; ++i) {
    acc[0] += static_cast<double>(g[i]) * g[i];
    out[i] = g[i] + e[i];
  }
  return std::sqrt((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

absl::Status UpdateResidualKernel(absl::Span<const float> p, absl::Span<const int32_t> indices,
                                  absl::Span<const float> sent_values, absl::Span<float> residual) {
  if (p.size() != residual.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "UpdateResidual: p has %d elements but the residual has %d", p.size(), residual.size()));
  }
  // Validate everything before writing, so the residual is unchanged on error.
  if (indices.size() != sent_values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "UpdateResidual: %d indices but %d sent values", indices.size(), sent_values.size()));
  }
  const int64_t n = static_cast<int64_t>(residual.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= n) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "UpdateResidual: index %d at position %d is outside [0, %d)", indices[i], i, n));
    }
  }
  if (residual.data() != p.data()) std::copy(p.begin(), p.end(), residual.begin());
  float* e = residual.data();
  for (size_t i = 0; i < indices.size(); ++i) e[indices[i]] -= sent_values[i];
  return absl::OkStatus();
}

ErrorFeedback::ErrorFeedback(int64_t n) : residual_(static_cast<size_t>(std::max<int64_t>(n, 0))) {}

absl::Status ErrorFeedback::Compensate(absl::Span<const float> grad, absl::Span<float> p) const {
  if (grad.size() != residual_.size() || p.size() != residual_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ErrorFeedback::Compensate: gradient has %d and output %d elements, residual has %d",
        grad.size(), p.size(), residual_.size()));
  }
  CompensateKernel(grad, residual_, p);
  return absl::OkStatus();
}

absl::Status ErrorFeedback::Update(absl::Span<const float> p, const Compressed& sent) {
  if (sent.dense_size != size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ErrorFeedback::Update: sent message has dense_size %d, residual has %d elements",
        sent.dense_size, size()));
  }
  if (p.size() != residual_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ErrorFeedback::Update: p has %d elements, residual has %d", p.size(), size()));
  }
  if (sent.dense) {
    if (sent.count() != size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ErrorFeedback::Update: dense message has %d values, expected %d", sent.count(), size()));
    }
    const float* v = sent.values.data();
    for (size_t i = 0; i < residual_.size(); ++i) residual_[i] = p[i] - v[i];
    return absl::OkStatus();
  }
  return UpdateResidualKernel(p, sent.indices, sent.values, absl::MakeSpan(residual_));
}

void ErrorFeedback::Clear() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  scratch_valid_ = false;
}

absl::StatusOr<absl::Span<const float>> ErrorFeedback::CompensateToScratch(
    absl::Span<const float> grad, double* grad_norm) {
  if (grad.size() != residual_.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ErrorFeedback::CompensateToScratch: gradient has %d elements, residual "
                        "has %d",
                        grad.size(), residual_.size()));
  }
  scratch_.resize(residual_.size());
  if (grad_norm == nullptr) {
    CompensateKernel(grad, residual_, absl::MakeSpan(scratch_));
  } else {
    *grad_norm = CompensateAndNormKernel(grad, residual_, absl::MakeSpan(scratch_));
  }
  scratch_valid_ = true;
  return absl::Span<const float>(scratch_);
}

absl::Status ErrorFeedback::CommitScratch(const Compressed& sent) {
  if (!scratch_valid_) {
    return absl::FailedPreconditionError(
        "ErrorFeedback::CommitScratch without a CompensateToScratch since the last commit");
  }
  if (sent.dense_size != size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ErrorFeedback::Update: sent message has dense_size %d, residual has %d elements",
        sent.dense_size, size()));
  }
  if (sent.dense) {
    if (sent.count() != size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ErrorFeedback::Update: dense message has %d values, expected %d", sent.count(), size()));
    }
    const float* v = sent.values.data();
    for (size_t i = 0; i < scratch_.size(); ++i) scratch_[i] -= v[i];
  } else {
    // p - sent in place in the scratch buffer, which then becomes the residual.
    RETURN_IF_ERROR(
        UpdateResidualKernel(scratch_, sent.indices, sent.values, absl::MakeSpan(scratch_)));
  }
  residual_.swap(scratch_);
  scratch_valid_ = false;
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cpu

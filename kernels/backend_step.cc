#include "kernels/backend_step.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::kernels {

absl::StatusOr<TopKStep> TopKStep::Create(CompressionBackend* backend, int64_t n) {
  if (backend == nullptr || n < 0 || n > 2147483647) {
    return absl::InvalidArgumentError(
        absl::StrFormat("TopKStep: needs a backend and 0 <= n <= 2^31 - 1, got n = %d", n));
  }
  TopKStep step;
  step.backend_ = backend;
  step.n_ = n;
  const size_t floats = static_cast<size_t>(n) * sizeof(float);
  ASSIGN_OR_RETURN(step.residual_, backend->Allocate(floats));
  ASSIGN_OR_RETURN(step.p_, backend->Allocate(floats));
  // The messages grow to the largest count selected (Select), so that a step at θ_min = 100
  // holds about 2% of n for them rather than n elements each.
  ASSIGN_OR_RETURN(step.idx_min_, backend->Allocate(0));
  ASSIGN_OR_RETURN(step.val_min_, backend->Allocate(0));
  ASSIGN_OR_RETURN(step.idx_c_, backend->Allocate(0));
  ASSIGN_OR_RETURN(step.val_c_, backend->Allocate(0));
  return step;
}

absl::Status TopKStep::Compress(const float* grad, int64_t k_min, int64_t k_c, Norms* norms) {
  if (k_c < 0 || k_min < k_c) {
    compensated_ = selected_min_ = selected_c_ = false;
    return absl::InvalidArgumentError(
        absl::StrFormat("TopKStep: needs 0 <= k_c <= k_min, got k_min = %d, k_c = %d", k_min, k_c));
  }
  absl::Status status = Compensate(grad);
  if (status.ok()) status = Select(Level::kMin, k_min);
  if (status.ok()) status = Select(Level::kCandidate, k_c);
  if (status.ok() && norms != nullptr) {
    absl::StatusOr<double> grad_sq = backend_->SumSquares(grad, n_);
    absl::StatusOr<double> min_sq = backend_->SumSquares(val_min_->floats(), count_min_);
    absl::StatusOr<double> c_sq = backend_->SumSquares(val_c_->floats(), count_c_);
    for (const absl::Status& s : {grad_sq.status(), min_sq.status(), c_sq.status()}) {
      if (status.ok()) status = s;
    }
    if (status.ok()) *norms = Norms{std::sqrt(*grad_sq), std::sqrt(*min_sq), std::sqrt(*c_sq)};
  }
  // A failed Compress leaves nothing to commit.
  if (!status.ok()) compensated_ = selected_min_ = selected_c_ = false;
  return status;
}

absl::Status TopKStep::Compensate(const float* grad, double* grad_norm) {
  compensated_ = selected_min_ = selected_c_ = false;
  if (grad_norm != nullptr) {
    ASSIGN_OR_RETURN(*grad_norm,
                     backend_->CompensateWithNorm(grad, residual_->floats(), p_->floats(), n_));
  } else {
    RETURN_IF_ERROR(backend_->Compensate(grad, residual_->floats(), p_->floats(), n_));
  }
  compensated_ = true;
  return absl::OkStatus();
}

absl::Status TopKStep::Select(Level level, int64_t k) {
  if (!compensated_) {
    return absl::FailedPreconditionError("TopKStep: Select without a successful Compensate");
  }
  if (k < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("TopKStep: needs k >= 0, got %d", k));
  }
  const bool min = level == Level::kMin;
  bool& selected = min ? selected_min_ : selected_c_;
  int64_t& count = min ? count_min_ : count_c_;
  selected = false;
  count = std::min(k, n_);
  std::unique_ptr<BackendMemory>& idx = min ? idx_min_ : idx_c_;
  std::unique_ptr<BackendMemory>& val = min ? val_min_ : val_c_;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);  // = count * sizeof(int32_t)
  if (idx->bytes() < bytes || val->bytes() < bytes) {
    count = 0;
    ASSIGN_OR_RETURN(idx, backend_->Allocate(bytes));
    ASSIGN_OR_RETURN(val, backend_->Allocate(bytes));
  }
  count = std::min(k, n_);
  RETURN_IF_ERROR(backend_->TopK(p_->floats(), n_, count, idx->ints(), val->floats()));
  selected = true;
  return absl::OkStatus();
}

absl::Status TopKStep::Commit(Level sent) {
  const bool selected = sent == Level::kMin ? selected_min_ : selected_c_;
  if (!compensated_ || !selected) {
    return absl::FailedPreconditionError(
        "TopKStep: Commit without a successful Compress (or Compensate and Select of the level)");
  }
  Message m = sent == Level::kMin ? at_min() : at_candidate();
  // e = p - sent, in p's buffer, which then becomes the residual.
  RETURN_IF_ERROR(
      backend_->UpdateResidual(p_->floats(), n_, m.indices, m.values, m.count, p_->floats()));
  RETURN_IF_ERROR(backend_->Synchronize());
  std::swap(residual_, p_);
  compensated_ = selected_min_ = selected_c_ = false;
  return absl::OkStatus();
}

absl::Status TopKStep::CommitDense() {
  if (!compensated_) {
    return absl::FailedPreconditionError("TopKStep: CommitDense without a successful Compensate");
  }
  RETURN_IF_ERROR(backend_->Zero(residual_->data(), static_cast<size_t>(n_) * sizeof(float)));
  compensated_ = selected_min_ = selected_c_ = false;
  return absl::OkStatus();
}

}  // namespace gravac::kernels

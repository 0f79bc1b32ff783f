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
  const size_t ints = static_cast<size_t>(n) * sizeof(int32_t);
  ASSIGN_OR_RETURN(step.residual_, backend->Allocate(floats));
  ASSIGN_OR_RETURN(step.p_, backend->Allocate(floats));
  ASSIGN_OR_RETURN(step.idx_min_, backend->Allocate(ints));
  ASSIGN_OR_RETURN(step.val_min_, backend->Allocate(floats));
  ASSIGN_OR_RETURN(step.idx_c_, backend->Allocate(ints));
  ASSIGN_OR_RETURN(step.val_c_, backend->Allocate(floats));
  return step;
}

absl::Status TopKStep::Compress(const float* grad, int64_t k_min, int64_t k_c, Norms* norms) {
  compressed_ = false;
  if (k_c < 0 || k_min < k_c) {
    return absl::InvalidArgumentError(
        absl::StrFormat("TopKStep: needs 0 <= k_c <= k_min, got k_min = %d, k_c = %d", k_min, k_c));
  }
  RETURN_IF_ERROR(backend_->Compensate(grad, residual_->floats(), p_->floats(), n_));
  count_min_ = std::min(k_min, n_);
  count_c_ = std::min(k_c, n_);
  RETURN_IF_ERROR(
      backend_->TopK(p_->floats(), n_, count_min_, idx_min_->ints(), val_min_->floats()));
  RETURN_IF_ERROR(backend_->TopK(p_->floats(), n_, count_c_, idx_c_->ints(), val_c_->floats()));
  if (norms != nullptr) {
    ASSIGN_OR_RETURN(double grad_sq, backend_->SumSquares(grad, n_));
    ASSIGN_OR_RETURN(double min_sq, backend_->SumSquares(val_min_->floats(), count_min_));
    ASSIGN_OR_RETURN(double c_sq, backend_->SumSquares(val_c_->floats(), count_c_));
    *norms = Norms{std::sqrt(grad_sq), std::sqrt(min_sq), std::sqrt(c_sq)};
  }
  compressed_ = true;
  return absl::OkStatus();
}

absl::Status TopKStep::Commit(Level sent) {
  if (!compressed_) {
    return absl::FailedPreconditionError("TopKStep: Commit without a successful Compress");
  }
  Message m = sent == Level::kMin ? at_min() : at_candidate();
  // e = p - sent, in p's buffer, which then becomes the residual.
  RETURN_IF_ERROR(
      backend_->UpdateResidual(p_->floats(), n_, m.indices, m.values, m.count, p_->floats()));
  RETURN_IF_ERROR(backend_->Synchronize());
  std::swap(residual_, p_);
  compressed_ = false;
  return absl::OkStatus();
}

absl::Status TopKStep::CommitDense() {
  if (!compressed_) {
    return absl::FailedPreconditionError("TopKStep: CommitDense without a successful Compress");
  }
  RETURN_IF_ERROR(backend_->Zero(residual_->data(), static_cast<size_t>(n_) * sizeof(float)));
  compressed_ = false;
  return absl::OkStatus();
}

}  // namespace gravac::kernels

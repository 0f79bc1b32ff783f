// TopKStep: one tensor's error-feedback multi-level top-k step (GRAVAC.md "Error feedback",
// "Multi-level compression") on a CompressionBackend, with all of its state in the backend's
// memory: the residual e, the compensated p = g + e, and the messages at θ_min (k_min elements)
// and at the candidate θ_c (k_c elements). The norms the policy reports (‖g‖ and the norms of
// both messages) come from the backend where the data lives. On the CUDA backend nothing but the
// three norms crosses to the host.
//
//   ASSIGN_OR_RETURN(TopKStep step, TopKStep::Create(backend, n));
//   RETURN_IF_ERROR(step.Compress(grad, k_min, k_c, &norms));   // p = g + e, both levels, norms
//   ... send step.at_min() or step.at_candidate() (or p, dense) ...
//   RETURN_IF_ERROR(step.Commit(TopKStep::Level::kMin));         // e = p - sent
//
// A caller that sends one level before it computes the other (the daemon's engine overlaps that
// work with the exchange) runs Compress's parts itself:
//
//   RETURN_IF_ERROR(step.Compensate(grad));                     // p = g + e
//   RETURN_IF_ERROR(step.Select(TopKStep::Level::kMin, k_min)); // the top k_min of p
//   ... send step.at_min() ...
//   RETURN_IF_ERROR(step.Commit(TopKStep::Level::kMin));
//
// It gives, bit for bit, the residual and messages of kernels::cpu::ErrorFeedback and the topk
// compressor, on either backend.
//
// Thread-safety: as the backend (one owner).
#ifndef GRAVAC_KERNELS_BACKEND_STEP_H_
#define GRAVAC_KERNELS_BACKEND_STEP_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace gravac::kernels {

class TopKStep {
 public:
  enum class Level { kMin, kCandidate };
  // A message in the backend's memory.
  struct Message {
    const int32_t* indices = nullptr;
    const float* values = nullptr;
    int64_t count = 0;
  };
  struct Norms {
    double grad = 0.0;          // ‖g‖
    double at_min = 0.0;        // ‖C(p, θ_min)‖
    double at_candidate = 0.0;  // ‖C(p, θ_c)‖
  };

  // State for a tensor of n elements (zero residual). `backend` is not owned and must outlive
  // the step.
  static absl::StatusOr<TopKStep> Create(CompressionBackend* backend, int64_t n);

  // p = grad + e (grad: n floats in the backend's memory), the top k_min and top k_c of p
  // (0 <= k_c <= k_min; k > n keeps n) and the norms. kInvalidArgument for non-finite input
  // (naming the first bad index) or bad counts; the residual is unchanged on error.
  absl::Status Compress(const float* grad, int64_t k_min, int64_t k_c, Norms* norms);

  // Compress in parts. Compensate: p = grad + e (grad as for Compress); forgets both messages.
  // With `grad_norm`, also ‖grad‖ in kernels::L2Norm's order from the same pass, on a backend
  // that fuses them (CompressionBackend::CompensateWithNorm; kUnimplemented elsewhere).
  absl::Status Compensate(const float* grad, double* grad_norm = nullptr);
  // The top min(k, n) of p (k >= 0) into `level`'s message, after Compensate. A level names a
  // message buffer: a caller may select either at any k (e.g. a level sent at a θ that is
  // neither θ_min nor θ_c). kInvalidArgument for non-finite p (naming the first bad index) or
  // k < 0; the message is then not selected and the residual unchanged.
  absl::Status Select(Level level, int64_t k);

  Message at_min() const { return Message{idx_min_->ints(), val_min_->floats(), count_min_}; }
  Message at_candidate() const { return Message{idx_c_->ints(), val_c_->floats(), count_c_}; }
  const float* p() const { return p_->floats(); }
  const float* residual() const { return residual_->floats(); }
  int64_t size() const { return n_; }

  // e = p - sent for the level that was sent (after Compress, or Compensate and Select of that
  // level); kFailedPrecondition otherwise.
  absl::Status Commit(Level sent);
  // e = 0: p was sent dense (after Compensate); kFailedPrecondition otherwise.
  absl::Status CommitDense();

 private:
  TopKStep() = default;

  CompressionBackend* backend_ = nullptr;
  int64_t n_ = 0;
  std::unique_ptr<BackendMemory> residual_, p_, idx_min_, val_min_, idx_c_, val_c_;
  int64_t count_min_ = 0;
  int64_t count_c_ = 0;
  bool compensated_ = false;   // p holds g + e of the current step
  bool selected_min_ = false;  // the messages hold selections of that p
  bool selected_c_ = false;
};

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_BACKEND_STEP_H_

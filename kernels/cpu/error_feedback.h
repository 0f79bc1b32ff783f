// ErrorFeedback: the residual e of one tensor on one node (GRAVAC.md, "Error feedback").
//
// Each step:  Compensate(g, p)  ->  p = g + e
//             m = C(p), sent or not
//             Update(p, m)      ->  e = p - decompress(m)   (only for the message actually sent)
//             or Clear()        ->  e = 0                   (a dense step sends everything)
// so that Σ_t sent_t + e_T = Σ_t g_t per element, up to fp32 rounding of the additions g + e.
//
// Update computes e = p, then e[idx] -= value for each sent (index, value): topk leaves exact
// zeros at the sent positions, and a dense cast leaves exactly its rounding error p - cast(p).
//
// The daemon uses the copy-free form of the same step: CompensateToScratch(g, &norm) writes
// p = g + e into a buffer the ErrorFeedback keeps between steps (and returns ‖g‖ from the same
// pass), the caller compresses p, and CommitScratch(m) makes that buffer the residual (a swap,
// no copy) before subtracting the sent values; ClearAfterScratch() is the dense step. The
// residual it leaves is bit for bit the one Compensate + Update leave.
//
// CompensateKernel / UpdateResidualKernel are the free CPU twins of the CUDA kernels in
// kernels/cuda/ (same arguments, same arithmetic, so the results agree bit for bit).
//
// Thread-safety: an ErrorFeedback is not thread-safe; one owner (the tensor's step) uses it. The
// free kernels are stateless.
#ifndef GRAVAC_KERNELS_CPU_ERROR_FEEDBACK_H_
#define GRAVAC_KERNELS_CPU_ERROR_FEEDBACK_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"

namespace gravac::kernels::cpu {

// p[i] = grad[i] + residual[i]. The three spans must have the same size (not checked here; the
// callers below check). p may alias grad.
void CompensateKernel(absl::Span<const float> grad, absl::Span<const float> residual,
                      absl::Span<float> p);

// p[i] = grad[i] + residual[i] as CompensateKernel, and ‖grad‖ in the same pass, summed as
// kernels::L2Norm sums (four lanes, then the tail into lane 0), which it returns bit for bit.
double CompensateAndNormKernel(absl::Span<const float> grad, absl::Span<const float> residual,
                               absl::Span<float> p);

// residual = p, then residual[indices[i]] -= sent_values[i]. Fails with InvalidArgument (and
// leaves residual unchanged) on a size mismatch or an index outside [0, residual.size()).
absl::Status UpdateResidualKernel(absl::Span<const float> p, absl::Span<const int32_t> indices,
                                  absl::Span<const float> sent_values, absl::Span<float> residual);

class ErrorFeedback {
 public:
  // A zero residual for a tensor of n >= 0 elements.
  explicit ErrorFeedback(int64_t n);

  int64_t size() const { return static_cast<int64_t>(residual_.size()); }

  // p = grad + e; grad and p must have size() elements (p may alias grad).
  absl::Status Compensate(absl::Span<const float> grad, absl::Span<float> p) const;

  // e = p - decompress(sent). `sent` must describe this tensor (dense_size == size()); a dense
  // cast subtracts every value, a sparse message only its indices.
  absl::Status Update(absl::Span<const float> p, const Compressed& sent);

  // e = 0: the whole of p was sent uncompressed.
  void Clear();

  // p = grad + e into the scratch buffer (grad must have size() elements), and ‖grad‖ (computed
  // as L2Norm in kernels/multilevel.h computes it) into *grad_norm when not null. The returned
  // span is valid until the next call of a non-const method.
  absl::StatusOr<absl::Span<const float>> CompensateToScratch(absl::Span<const float> grad,
                                                              double* grad_norm);
  // e = p - decompress(sent) for the p of the last CompensateToScratch, as Update does (the same
  // checks; on error the residual is unchanged). The scratch buffer becomes the residual.
  absl::Status CommitScratch(const Compressed& sent);

  absl::Span<const float> residual() const { return residual_; }

 private:
  std::vector<float> residual_;
  std::vector<float> scratch_;  // p of the last CompensateToScratch
  bool scratch_valid_ = false;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_ERROR_FEEDBACK_H_

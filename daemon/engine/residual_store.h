// ResidualStore: the error-feedback residuals of a job's compressed tensors, one
// kernels::cpu::ErrorFeedback per tensor name. A tensor whose element count changes starts
// again from a zero residual.
//
// Thread-safety: not thread-safe; owned by the engine thread (through the Executor).
#ifndef GRAVAC_DAEMON_ENGINE_RESIDUAL_STORE_H_
#define GRAVAC_DAEMON_ENGINE_RESIDUAL_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/error_feedback.h"

namespace gravac::daemon::internal {

class ResidualStore {
 public:
  // The residual of tensor `name` with `n` elements, created (zero) when there is none yet or
  // its size differs. The reference stays valid until the next For with a different size.
  kernels::cpu::ErrorFeedback& For(const std::string& name, int64_t n);

  // A copy of the residual of `name`; empty when none.
  std::vector<float> Copy(const std::string& name) const;

 private:
  std::map<std::string, kernels::cpu::ErrorFeedback> residuals_;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_RESIDUAL_STORE_H_

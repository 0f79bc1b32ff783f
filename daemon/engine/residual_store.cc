#include "daemon/engine/residual_store.h"

namespace gravac::daemon::internal {

kernels::cpu::ErrorFeedback& ResidualStore::For(const std::string& name, int64_t n) {
  auto it = residuals_.find(name);
  if (it == residuals_.end() || it->second.size() != n) {
    if (it != residuals_.end()) residuals_.erase(it);
    it = residuals_.emplace(name, kernels::cpu::ErrorFeedback(n)).first;
  }
  return it->second;
}

std::vector<float> ResidualStore::Copy(const std::string& name) const {
  auto it = residuals_.find(name);
  if (it == residuals_.end()) return {};
  return std::vector<float>(it->second.residual().begin(), it->second.residual().end());
}

}  // namespace gravac::daemon::internal

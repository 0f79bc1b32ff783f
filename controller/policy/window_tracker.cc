#include "controller/policy/window_tracker.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace gravac::policy {

absl::Status WindowTracker::ValidateParams(int window, double alpha) {
  if (window < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window tracker: W = %d, must be >= 1", window));
  }
  if (!std::isfinite(alpha) || alpha < 0.0 || alpha >= 1.0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window tracker: alpha = %g, must satisfy 0 <= alpha < 1", alpha));
  }
  return absl::OkStatus();
}

absl::StatusOr<WindowTracker> WindowTracker::Create(int window, double alpha) {
  if (absl::Status s = ValidateParams(window, alpha); !s.ok()) return s;
  return WindowTracker(window, alpha);
}

WindowTracker::WindowTracker(int window, double alpha) : alpha_(alpha), ring_(window, 0.0) {}

void WindowTracker::Add(double x) {
  ring_[next_] = x;
  next_ = (next_ + 1) % static_cast<int>(ring_.size());
  if (count_ < static_cast<int>(ring_.size())) ++count_;
}

double WindowTracker::Value() const {
  if (!full()) return 0.0;
  const int w = static_cast<int>(ring_.size());
  const double decay = 1.0 - alpha_;
  double weight = 1.0;
  double weighted_sum = 0.0;
  double weight_sum = 0.0;
  for (int i = 0; i < w; ++i) {  // i = 0 is the newest sample
    weighted_sum += weight * ring_[(next_ - 1 - i + 2 * w) % w];
    weight_sum += weight;
    weight *= decay;
  }
  return weighted_sum / weight_sum;
}

void WindowTracker::Reset() {
  next_ = 0;
  count_ = 0;
}

}  // namespace gravac::policy

// WindowTracker: the exponentially weighted window mean GraVAC smooths its gradient norms with.
//
// It holds the last `window` (W) samples. Value() is 0 until W samples have been added; then it is
// the weighted mean  Σ_i (1−α)^i · x_i / Σ_i (1−α)^i  over the held samples, where x_0 is the
// newest sample. With α = 0 it is the plain mean of the window. Check value (GRAVAC.md): W = 25,
// α = 0.05, inputs 1..25 → 15.596788.
//
// Contract: window >= 1 and 0 <= alpha < 1 (Create checks them; the constructor assumes them).
// Samples are taken as given (the caller validates them). Value() is deterministic: it sums the
// window in a fixed order, newest first, every call.
//
// Thread-safety: a plain value type; not safe for concurrent mutation.
#ifndef GRAVAC_CONTROLLER_POLICY_WINDOW_TRACKER_H_
#define GRAVAC_CONTROLLER_POLICY_WINDOW_TRACKER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::policy {

class WindowTracker {
 public:
  // InvalidArgument unless window >= 1 and 0 <= alpha < 1 (alpha finite).
  static absl::Status ValidateParams(int window, double alpha);
  static absl::StatusOr<WindowTracker> Create(int window, double alpha);

  // Precondition: ValidateParams(window, alpha) is OK.
  WindowTracker(int window, double alpha);

  // Appends a sample, dropping the oldest once W are held.
  void Add(double x);
  // True once W samples are held (since construction or the last Reset).
  bool full() const { return count_ == static_cast<int>(ring_.size()); }
  // Number of samples held, in [0, W].
  int size() const { return count_; }
  int window() const { return static_cast<int>(ring_.size()); }
  double alpha() const { return alpha_; }
  // 0 until full(); then the weighted mean described above.
  double Value() const;
  // Forgets every sample.
  void Reset();

 private:
  double alpha_;
  std::vector<double> ring_;  // W slots; next_ is where the next sample goes
  int next_ = 0;
  int count_ = 0;
};

}  // namespace gravac::policy

#endif  // GRAVAC_CONTROLLER_POLICY_WINDOW_TRACKER_H_

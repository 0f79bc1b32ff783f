#include "core/clock.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace gravac {
namespace {

class Real : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  absl::Duration RecheckEvery() const override { return absl::InfiniteDuration(); }
};

}  // namespace

const Clock& RealClock() {
  static const Real* const kReal = new Real();  // stateless; never destroyed
  return *kReal;
}

absl::Time ManualClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += std::max(d, absl::ZeroDuration());
}

bool AwaitUntil(const Clock& clock, absl::Mutex& mu, const absl::Condition& cond,
                absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - clock.Now();
    if (left <= absl::ZeroDuration()) return cond.Eval();
    if (mu.AwaitWithTimeout(cond, std::min(left, clock.RecheckEvery()))) return true;
  }
}

}  // namespace gravac

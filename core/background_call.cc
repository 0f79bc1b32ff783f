#include "core/background_call.h"

#include <utility>

namespace gravac {

BackgroundCall::BackgroundCall() : thread_([this] { Loop(); }) {}

BackgroundCall::~BackgroundCall() {
  Wait().IgnoreError();
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void BackgroundCall::Start(std::function<absl::Status()> fn) {
  {
    MutexLock lock(&mu_);
    if (pending_) {
      misuse_ = true;
      return;
    }
    pending_ = true;
    running_done_ = false;
    fn_ = std::move(fn);
  }
  cv_.SignalAll();
}

absl::Status BackgroundCall::Wait() {
  MutexLock lock(&mu_);
  if (misuse_) {
    misuse_ = false;
    while (!running_done_) cv_.Wait(&mu_);
    pending_ = false;
    result_ = absl::OkStatus();
    return absl::FailedPreconditionError(
        "BackgroundCall::Start while a call was pending: the second call did not run");
  }
  if (!pending_) return absl::OkStatus();
  while (!running_done_) cv_.Wait(&mu_);
  pending_ = false;
  return std::exchange(result_, absl::OkStatus());
}

void BackgroundCall::Loop() {
  for (;;) {
    std::function<absl::Status()> fn;
    {
      MutexLock lock(&mu_);
      while (!stop_ && fn_ == nullptr) cv_.Wait(&mu_);
      if (fn_ == nullptr) return;  // stop_ with nothing queued
      fn = std::move(fn_);
      fn_ = nullptr;
    }
    absl::Status status = fn();
    MutexLock lock(&mu_);
    result_ = std::move(status);
    running_done_ = true;
    cv_.SignalAll();
  }
}

}  // namespace gravac

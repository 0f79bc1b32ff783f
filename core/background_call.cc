#include "core/background_call.h"

#include <utility>

namespace gravac {

BackgroundCall::BackgroundCall() : thread_([this] { Loop(); }) {}

BackgroundCall::~BackgroundCall() {
  Wait().IgnoreError();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundCall::Start(std::function<absl::Status()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_) {
      misuse_ = true;
      return;
    }
    pending_ = true;
    running_done_ = false;
    fn_ = std::move(fn);
  }
  cv_.notify_all();
}

absl::Status BackgroundCall::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (misuse_) {
    misuse_ = false;
    cv_.wait(lock, [this] { return running_done_; });
    pending_ = false;
    result_ = absl::OkStatus();
    return absl::FailedPreconditionError(
        "BackgroundCall::Start while a call was pending: the second call did not run");
  }
  if (!pending_) return absl::OkStatus();
  cv_.wait(lock, [this] { return running_done_; });
  pending_ = false;
  return std::exchange(result_, absl::OkStatus());
}

void BackgroundCall::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || fn_ != nullptr; });
    if (fn_ == nullptr) return;  // stop_ with nothing queued
    std::function<absl::Status()> fn = std::move(fn_);
    fn_ = nullptr;
    lock.unlock();
    absl::Status status = fn();
    lock.lock();
    result_ = std::move(status);
    running_done_ = true;
    cv_.notify_all();
  }
}

}  // namespace gravac

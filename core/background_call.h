// BackgroundCall: one dedicated thread that runs one call at a time, so the caller can compute
// while a blocking operation (a collective on the wire) is in flight.
//
//   BackgroundCall call;
//   call.Start([&] { return comm->AllgathervAnySize(payload, &recv, &sizes); });
//   ... work that touches neither payload's writers nor recv / sizes ...
//   RETURN_IF_ERROR(call.Wait());
//
// Start hands `fn` to the thread; Wait blocks until it returned and yields its status. Everything
// `fn` wrote happens-before Wait returns, and everything the caller wrote before Start
// happens-before `fn` runs. Start requires that no call is pending (the previous one was waited
// for); the destructor waits for a pending call and joins the thread.
//
// Thread-safety: Start and Wait are called by one owning thread.
#ifndef GRAVAC_CORE_BACKGROUND_CALL_H_
#define GRAVAC_CORE_BACKGROUND_CALL_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/mutex.h"

namespace gravac {

class BackgroundCall {
 public:
  BackgroundCall();
  ~BackgroundCall();
  BackgroundCall(const BackgroundCall&) = delete;
  BackgroundCall& operator=(const BackgroundCall&) = delete;

  // Runs fn on the background thread. A call still pending is a programming error: Start then
  // runs nothing and the next Wait returns FailedPrecondition.
  void Start(std::function<absl::Status()> fn);

  // Blocks until the started call returned; its status. Without a started call: OK.
  absl::Status Wait();

 private:
  void Loop();

  Mutex mu_;
  CondVar cv_;
  std::function<absl::Status()> fn_ ABSL_GUARDED_BY(mu_);  // set: a call is queued for the thread
  bool pending_ ABSL_GUARDED_BY(mu_) = false;              // started and not yet waited for
  bool running_done_ ABSL_GUARDED_BY(mu_) = true;          // the started call returned
  bool misuse_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gravac

#endif  // GRAVAC_CORE_BACKGROUND_CALL_H_

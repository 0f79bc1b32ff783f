// Timeline: Horovod's timeline for gravac. A Chrome trace file (a JSON array of trace events, as
// chrome://tracing and Perfetto read it, in the shape Horovod's timeline writes) with one track
// ("process") per tensor, named after it, holding that tensor's phases on this node as complete
// events ("ph": "X", microseconds since Start): LOCAL_REDUCE, NEGOTIATE_<KIND> with one
// zero-length tick per node as it became ready (named after the node's ranks), then the
// operation (ALLREDUCE, ALLGATHER, BROADCAST, JOIN; args: collective, theta, decision_epoch,
// step) and within it its phases. Track 0 ("gravac job") carries counter events ("ph": "C") of
// the θ in force and the decision epoch at each executed group.
//
// The file is written as events come, flushed at most once a second and at Stop, which closes
// the array; a file cut short by a crash still loads in Perfetto and chrome://tracing (as
// Horovod's do).
//
// Thread-safety: all methods are thread-safe (one mutex); enabled() is a lock-free check for the
// hot path.
#ifndef GRAVAC_DAEMON_ENGINE_TIMELINE_H_
#define GRAVAC_DAEMON_ENGINE_TIMELINE_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/mutex.h"

namespace gravac::daemon::internal {

class Timeline {
 public:
  // One argument of an event: a name and its value as JSON (a number, or a quoted string from
  // Quote()).
  using Args = std::vector<std::pair<std::string, std::string>>;

  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts a new trace in `path` (created or truncated), ending the current one first.
  // InvalidArgument naming the path when it cannot be opened.
  absl::Status Start(const std::string& path);
  // Ends the trace (closes the JSON array and the file); no-op when none is open.
  void Stop();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // A complete event on `tensor`'s track from begin_ns to end_ns (absl::GetCurrentTimeNanos()
  // time); end_ns == begin_ns gives a tick; one that began before the trace started is cut at
  // the trace's start. Does nothing when disabled.
  void Span(const std::string& tensor, const std::string& name, int64_t begin_ns, int64_t end_ns,
            const Args& args = {});
  // A counter sample on the job's track.
  void Counter(const std::string& name, int64_t at_ns, const Args& values);

  static std::string Quote(const std::string& s);  // a JSON string literal

 private:
  void Write(const std::string& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int TrackLocked(const std::string& tensor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t Micros(int64_t ns) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (ns - start_ns_) / 1000;
  }

  std::atomic<bool> enabled_{false};
  Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t start_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_flush_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool first_event_ ABSL_GUARDED_BY(mu_) = true;
  std::map<std::string, int> tracks_ ABSL_GUARDED_BY(mu_);  // tensor -> pid
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_TIMELINE_H_

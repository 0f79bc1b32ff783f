// StepLog: the executor's step log (ExecutorOptions::step_log_path), one line per group run:
// "step=S epoch=E theta=T collective=C tensors=a,b" (the same on every node) followed by this
// node's timing of the group, "prepare_ms= exchange_ms= finish_ms= start_s=": compensation,
// compression and packing; the collective; decoding, scatter-add and averaging; and when the group
// started (Unix seconds). A phase that did not run counts zero.
//
// The file is opened for appending (O_APPEND) and each line is written with one write(2), so the
// lines of several daemons sharing a file do not interleave within a line.
//
// Thread-safety: not thread-safe; owned by the engine thread (through the Executor).
#ifndef GRAVAC_DAEMON_ENGINE_STEP_LOG_H_
#define GRAVAC_DAEMON_ENGINE_STEP_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ipc/unique_fd.h"

namespace gravac::daemon::internal {

// The phase boundaries of one group (absl::GetCurrentTimeNanos()); 0 = the phase did not start.
struct GroupTiming {
  int64_t start_ns = 0;
  int64_t exchange_start_ns = 0;
  int64_t exchange_end_ns = 0;
};

// What one line says about a group.
struct GroupRecord {
  int64_t step = 0;
  int64_t epoch = 0;
  double theta = 1.0;
  const char* collective = "";
  std::vector<std::string> tensors;
};

class StepLog {
 public:
  // A log that writes nothing.
  StepLog() = default;
  // Opens (creates) `path` for appending; "" gives a log that writes nothing.
  static absl::StatusOr<StepLog> Open(const std::string& path);

  bool enabled() const { return fd_.valid(); }

  // The line for `group`, timed from `timing` to `end_ns` (the group's end).
  static std::string Format(const GroupRecord& group, const GroupTiming& timing, int64_t end_ns);

  // Appends the line for `group` (ending now); does nothing when disabled.
  absl::Status Append(const GroupRecord& group, const GroupTiming& timing);

 private:
  StepLog(ipc::UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  ipc::UniqueFd fd_;
  std::string path_;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_STEP_LOG_H_

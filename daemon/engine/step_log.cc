#include "daemon/engine/step_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/errno_status.h"

namespace gravac::daemon::internal {

absl::StatusOr<StepLog> StepLog::Open(const std::string& path) {
  if (path.empty()) return StepLog();
  ipc::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return ErrnoStatus(absl::StatusCode::kInvalidArgument, errno,
                       absl::StrFormat("engine: cannot open step log '%s'", path));
  }
  return StepLog(std::move(fd), path);
}

std::string StepLog::Format(const GroupRecord& group, const GroupTiming& timing, int64_t end_ns) {
  const int64_t xs = timing.exchange_start_ns > 0 ? timing.exchange_start_ns : end_ns;
  const int64_t xe = timing.exchange_end_ns >= xs ? timing.exchange_end_ns : xs;
  return absl::StrFormat(
      "step=%d epoch=%d theta=%g collective=%s tensors=%s prepare_ms=%.3f exchange_ms=%.3f "
      "finish_ms=%.3f start_s=%.6f\n",
      group.step, group.epoch, group.theta, group.collective, absl::StrJoin(group.tensors, ","),
      (xs - timing.start_ns) * 1e-6, (xe - xs) * 1e-6, (end_ns - xe) * 1e-6,
      timing.start_ns * 1e-9);
}

absl::Status StepLog::Append(const GroupRecord& group, const GroupTiming& timing) {
  if (!enabled()) return absl::OkStatus();
  const std::string line = Format(group, timing, absl::GetCurrentTimeNanos());
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoStatus(absl::StatusCode::kInternal, n < 0 ? errno : EIO,
                         absl::StrFormat("engine: cannot write step log '%s'", path_));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace gravac::daemon::internal

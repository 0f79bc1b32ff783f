#include "daemon/engine/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gravac::daemon::internal {
namespace {

constexpr int64_t kFlushEveryNs = 1000000000;

std::string FormatArgs(const Timeline::Args& args) {
  std::string out = "{";
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", Timeline::Quote(args[i].first), ": ", args[i].second);
  }
  return out + "}";
}

}  // namespace

Timeline::~Timeline() { Stop(); }

std::string Timeline::Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

absl::Status Timeline::Start(const std::string& path) {
  Stop();
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("timeline: cannot open '%s': %s", path, std::strerror(errno)));
  }
  MutexLock lock(&mu_);
  file_ = file;
  start_ns_ = last_flush_ns_ = absl::GetCurrentTimeNanos();
  first_event_ = true;
  tracks_.clear();
  std::fputs("[\n", file_);
  Write(absl::StrFormat(
      R"({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "gravac job", )"
      R"("start_time_since_epoch_in_micros": %d}})",
      start_ns_ / 1000));
  Write(R"({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}})");
  enabled_.store(true);
  return absl::OkStatus();
}

void Timeline::Stop() {
  MutexLock lock(&mu_);
  enabled_.store(false);
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

void Timeline::Write(const std::string& event) {
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  std::fputs(event.c_str(), file_);
  const int64_t now = absl::GetCurrentTimeNanos();
  if (now - last_flush_ns_ >= kFlushEveryNs) {
    std::fflush(file_);
    last_flush_ns_ = now;
  }
}

int Timeline::TrackLocked(const std::string& tensor) {
  auto [it, inserted] = tracks_.try_emplace(tensor, static_cast<int>(tracks_.size()) + 1);
  if (inserted) {
    Write(absl::StrFormat(R"({"name": "process_name", "ph": "M", "pid": %d, "args": {"name": %s}})",
                          it->second, Quote(tensor)));
    Write(absl::StrFormat(
        R"({"name": "process_sort_index", "ph": "M", "pid": %d, "args": {"sort_index": %d}})",
        it->second, it->second));
  }
  return it->second;
}

void Timeline::Span(const std::string& tensor, const std::string& name, int64_t begin_ns,
                    int64_t end_ns, const Args& args) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  const int pid = TrackLocked(tensor);
  // A phase that began before the trace did (a tensor posted before --timeline-filename's trace
  // opened at the engine's start) is cut at the trace's start: no event has a negative ts.
  begin_ns = std::max(begin_ns, start_ns_);
  const int64_t ts = Micros(begin_ns);
  const int64_t dur = end_ns > begin_ns ? (end_ns - begin_ns) / 1000 : 0;
  Write(absl::StrFormat(
      R"({"name": %s, "ph": "X", "pid": %d, "tid": 0, "ts": %d, "dur": %d, "args": %s})",
      Quote(name), pid, ts, dur, FormatArgs(args)));
}

void Timeline::Counter(const std::string& name, int64_t at_ns, const Args& values) {
  if (!enabled()) return;
  MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  Write(absl::StrFormat(R"({"name": %s, "ph": "C", "pid": 0, "ts": %d, "args": %s})", Quote(name),
                        Micros(at_ns), FormatArgs(values)));
}

}  // namespace gravac::daemon::internal

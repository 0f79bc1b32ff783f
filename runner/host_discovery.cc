#include "runner/host_discovery.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/absl_compat.h"
#include "core/status.h"

namespace gravac::runner {
namespace {

constexpr int kMaxSlots = 65536;
constexpr size_t kMaxOutput = 1 << 20;  // more than any host list; the rest is dropped

bool ValidHostName(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

// The last non-empty line of `text`, for error messages.
std::string LastLine(std::string_view text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n', absl::SkipWhitespace())) {
    last = std::string(absl::StripAsciiWhitespace(line));
  }
  return last;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseDiscoveredHosts(std::string_view text,
                                                            int default_slots,
                                                            std::string_view script) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(AsAbsl(text), '\n')) {
    ++line_no;
    const std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty()) continue;
    const std::string where =
        absl::StrFormat("--host-discovery-script %s: line %d '%s'", script, line_no, line);
    HostSlots h;
    h.slots = default_slots;
    const size_t colon = line.find(':');
    h.host = line.substr(0, colon);
    if (!ValidHostName(h.host)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: '%s' is not a host name (letters, digits, '.', '-', '_'; one host a line, "
          "'host' or 'host:slots')",
          where, h.host));
    }
    if (colon != std::string::npos) {
      const std::string slots = line.substr(colon + 1);
      if (!absl::SimpleAtoi(slots, &h.slots) || h.slots < 1 || h.slots > kMaxSlots) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: slots '%s' of host '%s' are not a positive integer (1..%d)", where, slots,
            h.host, kMaxSlots));
      }
    }
    if (!seen.insert(h.host).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: host '%s' is listed twice", where, h.host));
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--host-discovery-script %s printed no host (one a line, 'host' or 'host:slots')",
        script));
  }
  return hosts;
}

absl::Status HostDiscovery::Start(absl::Time now) {
  if (child_.running()) return absl::OkStatus();
  out_.clear();
  err_.clear();
  ASSIGN_OR_RETURN(child_, Child::Start(ChildOptions{.argv = {script_}, .env = {}, .netns = "", .stdin_fd = -1}));
  deadline_ = now + timeout_;
  return absl::OkStatus();
}

void HostDiscovery::Drain() {
  char buf[4096];
  for (int fd : {child_.stdout_fd(), child_.stderr_fd()}) {
    if (fd < 0) continue;
    std::string& sink = fd == child_.stdout_fd() ? out_ : err_;
    while (true) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0 || p.revents == 0) break;
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        if (sink.size() < kMaxOutput) sink.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      child_.CloseOutput(fd);  // end of file (or an error): nothing more comes
      break;
    }
  }
}

std::optional<absl::StatusOr<std::vector<HostSlots>>> HostDiscovery::Poll(absl::Time now) {
  if (!child_.running()) return std::nullopt;
  Drain();
  if (!child_.TryReap()) {
    if (now < deadline_) return std::nullopt;
    child_.KillGroup();
    while (!child_.TryReap()) ::usleep(1000);
    Drain();
    return absl::DeadlineExceededError(absl::StrFormat(
        "--host-discovery-script %s did not finish within %s (killed)", script_,
        absl::FormatDuration(timeout_)));
  }
  Drain();  // what it wrote just before exiting
  child_.KillGroup();  // anything it left running in its group
  const Child& c = child_;
  const std::string err = LastLine(err_);
  absl::Status failed;
  if (c.killed_by_signal()) {
    failed = absl::FailedPreconditionError(absl::StrFormat(
        "--host-discovery-script %s was killed by signal %d (%s)", script_, c.term_signal(),
        strsignal(c.term_signal())));
  } else if (c.exit_code() != 0) {
    failed = absl::FailedPreconditionError(absl::StrFormat(
        "--host-discovery-script %s exited with code %d%s", script_, c.exit_code(),
        c.exit_code() == 127 || c.exit_code() == 126 ? " (not found or not executable)" : ""));
  }
  std::string out = std::move(out_);
  child_ = Child();
  if (!failed.ok()) {
    if (err.empty()) return failed;
    return absl::Status(failed.code(), absl::StrFormat("%s: %s", failed.message(), err));
  }
  return ParseDiscoveredHosts(out, default_slots_, script_);
}

absl::StatusOr<std::vector<HostSlots>> HostDiscovery::RunOnce() {
  RETURN_IF_ERROR(Start(absl::Now()));
  while (true) {
    if (auto result = Poll(absl::Now())) return *std::move(result);
    std::vector<pollfd> fds;
    for (int fd : {child_.stdout_fd(), child_.stderr_fd()}) {
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 20);
  }
}

}  // namespace gravac::runner

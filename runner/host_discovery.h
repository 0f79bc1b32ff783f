// Host discovery for elastic jobs (gravacrun --host-discovery-script; Horovod's format): a program
// that prints the hosts the job may use now, one a line, `host` or `host:slots` (slots: ranks on
// that host; a bare host gets the default, --slots). gravacrun runs it about once a second
// (HostDiscovery, without blocking its event loop) and grows or shrinks the job to what it
// printed (launcher.h).
//
// Bad output is refused whole, naming the line: a host name that is not a host name (letters,
// digits, '.', '-', '_'; at most 253 characters), slots that are not a positive integer (at most
// 65536), a host listed twice, no host at all. A run that exits non-zero, is killed by a signal,
// does not finish within its timeout (its process group is killed) or cannot be executed fails
// likewise, with its exit and the last line it wrote to stderr. The caller keeps the last good
// host set (as Horovod does) and warns.
//
// Thread-safety: ParseDiscoveredHosts is stateless; a HostDiscovery is driven by one thread.
#ifndef GRAVAC_RUNNER_HOST_DISCOVERY_H_
#define GRAVAC_RUNNER_HOST_DISCOVERY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runner/child.h"
#include "runner/hosts.h"

namespace gravac::runner {

// Parses one run's stdout (`script` only names it in errors). InvalidArgument as above.
absl::StatusOr<std::vector<HostSlots>> ParseDiscoveredHosts(std::string_view text,
                                                            int default_slots,
                                                            std::string_view script);

class HostDiscovery {
 public:
  HostDiscovery(std::string script, int default_slots, absl::Duration timeout)
      : script_(std::move(script)), default_slots_(default_slots), timeout_(timeout) {}

  // Starts one run unless one is running. Fails only when the process cannot be started.
  absl::Status Start(absl::Time now);
  bool running() const { return child_.running(); }
  // Reads what the running script wrote; once it ended (or timed out: killed), returns its
  // parsed hosts or the error. Never blocks. nullopt while it runs (or when none was started).
  std::optional<absl::StatusOr<std::vector<HostSlots>>> Poll(absl::Time now);
  // Runs the script once to its end (the first discovery), at most its timeout.
  absl::StatusOr<std::vector<HostSlots>> RunOnce();

  const std::string& script() const { return script_; }

 private:
  void Drain();

  const std::string script_;
  const int default_slots_;
  const absl::Duration timeout_;
  Child child_;
  absl::Time deadline_;
  std::string out_;
  std::string err_;
};

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_HOST_DISCOVERY_H_

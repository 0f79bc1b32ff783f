// Child: one process of a job started by gravacrun (controller, daemon or worker), with its
// stdout and stderr on pipes that the launcher reads and prefixes line by line.
//
// The child runs in its own process group (so a terminal's Ctrl-C reaches only gravacrun, which
// forwards it, and a signal to the group reaches the child's own children, e.g. those of `sh -c`),
// gets SIGKILL when gravacrun's thread that started it dies (PR_SET_PDEATHSIG), reads /dev/null
// (or the given fd) as stdin, and, when `netns` is set, runs inside that network namespace through
// `ip netns exec` (which execs in place, so pid() is the program's pid).
//
// Ownership: a Child owns its process; destroying one whose process still runs kills its group
// with SIGKILL and reaps it. The output fds belong to the Child and are closed by it.
// Thread-safety: not thread-safe; one thread drives a Child.
#ifndef GRAVAC_RUNNER_CHILD_H_
#define GRAVAC_RUNNER_CHILD_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gravac::runner {

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  // Variables set (or overridden) on top of the parent's environment.
  std::vector<std::pair<std::string, std::string>> env;
  std::string netns;  // "" = the caller's network namespace
  int stdin_fd = -1;  // the child's stdin when >= 0 (the caller keeps its fd); else /dev/null
};

class Child {
 public:
  // Forks and execs. Fails with InvalidArgument on an empty argv and with the errno of
  // pipe/fork otherwise; an exec failure shows as exit code 127 with a message on its stderr.
  static absl::StatusOr<Child> Start(const ChildOptions& options);

  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Read ends of the child's stdout and stderr; -1 once closed (CloseOutput).
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  void CloseOutput(int fd);

  // Non-blocking reap. Returns true once the process has ended and fills the wait status
  // decoded as an exit code (128 + signal for a process killed by a signal).
  bool TryReap();
  int exit_code() const { return exit_code_; }
  bool killed_by_signal() const { return term_signal_ > 0; }
  int term_signal() const { return term_signal_; }

  // Sends `signal` to the child's process group (no-op once reaped).
  void SignalGroup(int signal);
  // SIGKILL to the process group, also after the child itself was reaped (its own children may
  // still run in the group).
  void KillGroup();

 private:
  void Reset();

  pid_t pid_ = -1;
  pid_t pgid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int exit_code_ = -1;
  int term_signal_ = 0;
};

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_CHILD_H_

// Process: a child process started with fork + exec, optionally inside a network namespace, and
// the small Status-returning command runner that the emulated cluster shells out through.
//
//   ASSIGN_OR_RETURN(Process p, Process::Spawn({"iperf3", "-s"}, {.netns = "gravac-12-s7-n1"}));
//   ASSIGN_OR_RETURN(std::string out, RunChecked({"ip", "netns", "list"}));
//
// A child that should run in a namespace is started as `ip netns exec NS argv...`: ip execs the
// program in place (same pid) after entering the namespace and remounting /sys, so tools that read
// /sys/class/net (UCX, iproute2) see the namespace's interfaces. errno and exit statuses are
// converted to absl::Status here, at the edge; a failed command's message carries its argv, its
// exit status and its stderr.
//
// Ownership: a Process owns its child. Destroying (or move-assigning over) a Process whose child
// still runs sends it SIGKILL and reaps it, so no child outlives its owner unnoticed.
// Thread-safety: a Process is not thread-safe; distinct Process objects may be used from different
// threads. RunCommand/RunChecked are safe to call concurrently.
#ifndef GRAVAC_NETEMU_PROCESS_H_
#define GRAVAC_NETEMU_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gravac::netemu {

// Where a child's stdout/stderr go.
enum class OutputMode {
  kInherit,  // the parent's stream
  kNull,     // /dev/null
  kCapture,  // a pipe read by Process::Collect
};

struct SpawnOptions {
  std::string netns;  // network namespace name (as in `ip netns list`); "" = the caller's
  // Variables set (or overridden) in the child's environment, on top of the parent's.
  std::vector<std::pair<std::string, std::string>> env;
  OutputMode output = OutputMode::kInherit;
  int stdin_fd = -1;         // becomes the child's stdin when >= 0 (the caller keeps its copy)
  bool new_session = false;  // setsid() in the child: terminal signals (Ctrl-C) do not reach it
};

// How a child ended: exit_code >= 0 when it exited, term_signal > 0 when a signal killed it.
struct ExitStatus {
  int exit_code = -1;
  int term_signal = 0;
  bool success() const { return exit_code == 0; }
  std::string ToString() const;
};

struct CommandResult {
  ExitStatus status;
  std::string out;  // captured stdout
  std::string err;  // captured stderr
};

class Process {
 public:
  // Starts argv[0] (looked up in PATH) with argv. Fails with InvalidArgument on an empty argv and
  // with the errno of fork/pipe otherwise; an exec failure shows as exit code 127 with a message
  // on the child's stderr.
  static absl::StatusOr<Process> Spawn(const std::vector<std::string>& argv,
                                       const SpawnOptions& options = {});

  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Blocks until the child ends or `timeout` passes (DeadlineExceeded; the child keeps running).
  absl::StatusOr<ExitStatus> Wait(absl::Duration timeout = absl::InfiniteDuration());

  // Reads captured output until both streams close and waits for the child, all within `timeout`.
  // On timeout the child is killed and DeadlineExceeded is returned with what was read so far.
  absl::StatusOr<CommandResult> Collect(absl::Duration timeout = absl::InfiniteDuration());

  // Sends `signal` to the child (no-op once it has been reaped).
  absl::Status Signal(int signal);

  // SIGKILL + reap. Returns how the child ended (already-reaped children return their status).
  absl::StatusOr<ExitStatus> Kill();

 private:
  void Reset();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  ExitStatus last_status_;
};

struct CommandOptions {
  std::string netns;
  std::vector<std::pair<std::string, std::string>> env;
  absl::Duration timeout = absl::Seconds(30);
};

// Runs argv to completion with stdout/stderr captured. Fails only when the command cannot be run
// or exceeds the timeout; a non-zero exit is reported in the result.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const CommandOptions& options = {});

// Like RunCommand but a non-zero exit becomes an Internal error whose message holds the command
// line, the exit status and stderr. Returns stdout.
absl::StatusOr<std::string> RunChecked(const std::vector<std::string>& argv,
                                       const CommandOptions& options = {});

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_PROCESS_H_

#include "netemu/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "netemu/exec_args.h"

namespace gravac::netemu {
namespace {

ExitStatus FromWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFEXITED(wstatus)) s.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) s.term_signal = WTERMSIG(wstatus);
  return s;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (term_signal > 0) return absl::StrCat("killed by signal ", term_signal);
  return absl::StrCat("exit code ", exit_code);
}

absl::StatusOr<Process> Process::Spawn(const std::vector<std::string>& argv,
                                       const SpawnOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("Process::Spawn: empty argv");
  std::vector<std::string> args;
  if (!options.netns.empty()) args = {"ip", "netns", "exec", options.netns};
  args.insert(args.end(), argv.begin(), argv.end());
  std::vector<std::string> env = ChildEnvironment(options.env);
  std::vector<char*> c_args = ExecStrings(args);
  std::vector<char*> c_env = ExecStrings(env);

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int null_fd = -1;
  if (options.output == OutputMode::kCapture) {
    GRAVAC_RETURN_IF_ERRNO(pipe2(out_pipe, O_CLOEXEC));
    if (pipe2(err_pipe, O_CLOEXEC) == -1) {
      int err = errno;
      close(out_pipe[0]);
      close(out_pipe[1]);
      return ErrnoCallStatus(err, "pipe2(err_pipe, O_CLOEXEC)", __FILE__, __LINE__);
    }
  } else if (options.output == OutputMode::kNull) {
    GRAVAC_RETURN_IF_ERRNO(null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC));
  }

  pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (out_pipe[1] >= 0) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
    } else if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    if (options.stdin_fd >= 0) dup2(options.stdin_fd, STDIN_FILENO);
    if (options.new_session) setsid();
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGTERM, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(c_args[0], c_args.data(), c_env.data());
    const char msg[] = "Process::Spawn: exec failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  int fork_errno = errno;
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  CloseFd(null_fd);
  if (pid < 0) {
    CloseFd(out_pipe[0]);
    CloseFd(err_pipe[0]);
    return ErrnoCallStatus(fork_errno, "fork()", __FILE__, __LINE__);
  }
  Process p;
  p.pid_ = pid;
  p.out_fd_ = out_pipe[0];
  p.err_fd_ = err_pipe[0];
  return p;
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, -1);
    out_fd_ = std::exchange(other.out_fd_, -1);
    err_fd_ = std::exchange(other.err_fd_, -1);
    last_status_ = other.last_status_;
  }
  return *this;
}

Process::~Process() { Reset(); }

void Process::Reset() {
  if (pid_ > 0) (void)Kill();
  CloseFd(out_fd_);
  CloseFd(err_fd_);
}

absl::StatusOr<ExitStatus> Process::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return last_status_;
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      last_status_ = FromWaitStatus(wstatus);
      pid_ = -1;
      return last_status_;
    }
    if (r == -1 && errno != EINTR) {
      int err = errno;
      pid_ = -1;
      return ErrnoCallStatus(err, "waitpid(pid_, &wstatus, WNOHANG)", __FILE__, __LINE__);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("process ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
    pause = std::min(pause * 2, absl::Milliseconds(20));
  }
}

absl::StatusOr<CommandResult> Process::Collect(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  CommandResult result;
  char buf[16384];
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    pollfd fds[2];
    int n = 0;
    if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      (void)Kill();
      return absl::DeadlineExceededError(
          absl::StrCat("command did not finish within ", absl::FormatDuration(timeout),
                       "; stdout: ", result.out, "; stderr: ", result.err));
    }
    int wait_ms =
        left == absl::InfiniteDuration()
            ? -1
            : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
    int ready = poll(fds, n, wait_ms);
    if (ready == -1) {
      if (errno == EINTR) continue;
      return ErrnoCallStatus(errno, "poll(fds, n, wait_ms)", __FILE__, __LINE__);
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      int& fd = fds[i].fd == out_fd_ ? out_fd_ : err_fd_;
      std::string& sink = &fd == &out_fd_ ? result.out : result.err;
      ssize_t got = read(fd, buf, sizeof(buf));
      if (got > 0) {
        sink.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        CloseFd(fd);
      }
    }
  }
  absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  absl::StatusOr<ExitStatus> status = Wait(left);
  if (!status.ok()) {
    (void)Kill();
    return status.status();
  }
  result.status = *status;
  return result;
}

absl::Status Process::Signal(int signal) {
  if (pid_ <= 0) return absl::OkStatus();
  GRAVAC_RETURN_IF_ERRNO(kill(pid_, signal));
  return absl::OkStatus();
}

absl::StatusOr<ExitStatus> Process::Kill() {
  if (pid_ <= 0) return last_status_;
  kill(pid_, SIGKILL);
  return Wait();
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const CommandOptions& options) {
  SpawnOptions spawn;
  spawn.netns = options.netns;
  spawn.env = options.env;
  spawn.output = OutputMode::kCapture;
  ASSIGN_OR_RETURN(Process p, Process::Spawn(argv, spawn));
  absl::StatusOr<CommandResult> result = p.Collect(options.timeout);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("`", absl::StrJoin(argv, " "), "`",
                                     (options.netns.empty() ? "" : " in netns "), options.netns,
                                     ": ", result.status().message()));
  }
  return result;
}

absl::StatusOr<std::string> RunChecked(const std::vector<std::string>& argv,
                                       const CommandOptions& options) {
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, options));
  if (!r.status.success()) {
    std::string where = options.netns.empty() ? "" : absl::StrCat(" in netns ", options.netns);
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "`", where, " failed (",
                                            r.status.ToString(), "): ", r.err));
  }
  return std::move(r.out);
}

}  // namespace gravac::netemu

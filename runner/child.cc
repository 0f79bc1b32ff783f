#include "runner/child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>


#include "absl/strings/str_cat.h"
#include "core/errno_status.h"
#include "netemu/exec_args.h"

namespace gravac::runner {
namespace {

absl::Status ErrnoError(const char* call) {
  return ErrnoStatus(absl::StatusCode::kInternal, errno, absl::StrCat(call, " failed"));
}

}  // namespace

absl::StatusOr<Child> Child::Start(const ChildOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Child::Start: empty argv");
  std::vector<std::string> args;
  if (!options.netns.empty()) args = {"ip", "netns", "exec", options.netns};
  args.insert(args.end(), options.argv.begin(), options.argv.end());
  std::vector<std::string> env = netemu::ChildEnvironment(options.env);
  std::vector<char*> c_args = netemu::ExecStrings(args);
  std::vector<char*> c_env = netemu::ExecStrings(env);

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) == -1) return ErrnoError("pipe2 (stdout)");
  if (pipe2(err_pipe, O_CLOEXEC) == -1) {
    absl::Status s = ErrnoError("pipe2 (stderr)");
    close(out_pipe[0]);
    close(out_pipe[1]);
    return s;
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (options.stdin_fd >= 0) {
      dup2(options.stdin_fd, STDIN_FILENO);
    } else if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
    }
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP}) sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(c_args[0], c_args.data(), c_env.data());
    const char msg[] = "gravacrun: exec failed: ";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ignored = write(STDERR_FILENO, c_args[0], strlen(c_args[0]));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    _exit(127);
  }
  int fork_errno = errno;
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    errno = fork_errno;
    return ErrnoError("fork");
  }
  setpgid(pid, pid);  // also from the parent, so signals to the group work at once
  Child child;
  child.pid_ = pid;
  child.pgid_ = pid;
  child.out_fd_ = out_pipe[0];
  child.err_fd_ = err_pipe[0];
  return child;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, -1);
    pgid_ = std::exchange(other.pgid_, -1);
    out_fd_ = std::exchange(other.out_fd_, -1);
    err_fd_ = std::exchange(other.err_fd_, -1);
    exit_code_ = other.exit_code_;
    term_signal_ = other.term_signal_;
  }
  return *this;
}

Child::~Child() { Reset(); }

void Child::Reset() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int wstatus = 0;
    while (waitpid(pid_, &wstatus, 0) == -1 && errno == EINTR) {
    }
    pid_ = -1;
  }
  netemu::CloseFd(out_fd_);
  netemu::CloseFd(err_fd_);
}

void Child::CloseOutput(int fd) {
  if (fd == out_fd_) netemu::CloseFd(out_fd_);
  if (fd == err_fd_) netemu::CloseFd(err_fd_);
}

bool Child::TryReap() {
  if (pid_ <= 0) return true;
  int wstatus = 0;
  pid_t r = waitpid(pid_, &wstatus, WNOHANG);
  if (r == 0 || (r == -1 && errno == EINTR)) return false;
  if (r == pid_ && WIFSIGNALED(wstatus)) {
    term_signal_ = WTERMSIG(wstatus);
    exit_code_ = 128 + term_signal_;
  } else if (r == pid_ && WIFEXITED(wstatus)) {
    exit_code_ = WEXITSTATUS(wstatus);
  } else {
    exit_code_ = 255;  // waitpid failed (ECHILD): the status is lost
  }
  pid_ = -1;
  return true;
}

void Child::KillGroup() {
  if (pgid_ > 0) kill(-pgid_, SIGKILL);
  if (pid_ > 0) kill(pid_, SIGKILL);
}

void Child::SignalGroup(int signal) {
  if (pid_ <= 0) return;
  if (kill(-pid_, signal) == -1) kill(pid_, signal);
}

}  // namespace gravac::runner

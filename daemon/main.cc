// gravacd: the node daemon (see gravacd.h). Builds the object graph from the settings table and
// runs it; SIGINT / SIGTERM stop it cleanly (read from a signalfd by a helper thread, which asks
// the daemon to stop; if the daemon has not stopped 10 s later the process exits with 1).
//
// /metrics is served from start-up (--metrics_address, default 0.0.0.0:9471; off = not served).
//
//   gravacd --controller=10.0.0.1:7070 --socket=/run/gravac/gravacd.sock --local_size=4
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/settings.h"
#include "core/status.h"
#include "daemon/gravacd.h"

namespace gravac::daemon {
namespace {

constexpr int kStopGraceMs = 10000;

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "node";
  return name;
}

// Waits for SIGINT/SIGTERM on `signal_fd` or for `done_fd`; on a signal, asks the daemon to stop
// and bounds how long it may take.
void WatchSignals(int signal_fd, int done_fd, Gravacd* daemon, Logger* log,
                  const std::string& socket_path) {
  pollfd fds[2] = {{signal_fd, POLLIN, 0}, {done_fd, POLLIN, 0}};
  while (poll(fds, 2, -1) < 0) {
  }
  if (fds[1].revents != 0) return;
  signalfd_siginfo info;
  if (read(signal_fd, &info, sizeof(info)) != sizeof(info)) return;
  GRAVAC_LOG(*log, kInfo, "got %s; stopping", strsignal(static_cast<int>(info.ssi_signo)));
  daemon->RequestStop();
  pollfd done = {done_fd, POLLIN, 0};
  if (poll(&done, 1, kStopGraceMs) > 0) return;
  GRAVAC_LOG(*log, kError, "did not stop within %d ms of the signal; exiting", kStopGraceMs);
  unlink(socket_path.c_str());
  std::_Exit(1);
}

int Main(const Settings& settings) {
  absl::StatusOr<std::string> level_text = settings.GetString("log_level");
  absl::StatusOr<LogLevel> level =
      level_text.ok() ? ParseLogLevel(*level_text) : absl::StatusOr<LogLevel>(level_text.status());
  absl::StatusOr<GravacdOptions> options = GravacdOptionsFromSettings(settings);
  if (!level.ok() || !options.ok()) {
    absl::FPrintF(stderr, "gravacd: bad settings: %s\n",
                  (!level.ok() ? level.status() : options.status()).ToString());
    return 2;
  }
  if (options->node_name.empty()) options->node_name = HostName();
  Logger log(StrCat("gravacd[", options->node_name, "]"), *level);
  GRAVAC_LOG(log, kInfo, "%s", GravacdBuild());

  // Signals are read from a signalfd; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  const int done_fd = eventfd(0, EFD_CLOEXEC);
  if (signal_fd < 0 || done_fd < 0) {
    GRAVAC_LOG(log, kError, "cannot create the signalfd/eventfd: %s", ErrnoText(errno));
    return 1;
  }

  // After the signals are blocked: the metrics server's threads inherit the mask.
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics = StartGravacdMetrics(*options, &log);
  if (!metrics.ok()) {
    GRAVAC_LOG(log, kError, "%s", metrics.status().ToString());
    return 1;
  }

  Gravacd daemon(*options, &log, &(*metrics)->registry());
  std::thread watcher(WatchSignals, signal_fd, done_fd, &daemon, &log, options->socket_path);
  absl::Status status = daemon.Run();
  const uint64_t one = 1;
  ssize_t ignored = write(done_fd, &one, sizeof(one));
  (void)ignored;
  watcher.join();
  close(signal_fd);
  close(done_fd);
  if (!status.ok()) {
    GRAVAC_LOG(log, kError, "%s", status.ToString());
    return 1;
  }
  GRAVAC_LOG(log, kInfo, "exiting");
  return 0;
}

}  // namespace
}  // namespace gravac::daemon

int main(int argc, char** argv) {
  using gravac::Settings;
  std::vector<const char*> args(argv + 1, argv + argc);
  absl::StatusOr<Settings> settings =
      Settings::Parse(gravac::daemon::GravacdSettings(), args, gravac::ProcessEnvironment());
  if (!settings.ok()) {
    absl::FPrintF(stderr, "gravacd: %s\n", settings.status().ToString());
    return 2;
  }
  if (settings->help_requested()) {
    std::fputs(Settings::Help(gravac::daemon::GravacdSettings(), "gravacd").c_str(), stdout);
    absl::FPrintF(stdout, "\n%s\n", gravac::daemon::GravacdBuild());
    return 0;
  }
  if (!settings->positional().empty()) {
    absl::FPrintF(stderr, "gravacd: unexpected argument '%s'\n", settings->positional()[0]);
    return 2;
  }
  return gravac::daemon::Main(*settings);
}

#include "tests/runner/cli_helpers.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace gravac::runner {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> FakeJobArgs(const FakeJob& job, int np, int nodes,
                                     const std::vector<std::string>& command) {
  std::vector<std::string> args = {GRAVACRUN_BIN,
                                   "-np",
                                   std::to_string(np),
                                   "--nodes",
                                   std::to_string(nodes),
                                   "--gravacd_path",
                                   job.Path("daemon.sh"),
                                   "--controller_path",
                                   job.Path("controller.sh"),
                                   "--run_dir",
                                   job.Path("run"),
                                   "--exit_grace_s",
                                   "0.3",
                                   "--"};
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

bool WaitForLines(const std::string& path, size_t lines, absl::Duration limit,
                  std::vector<pid_t>* pids) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    pids->clear();
    for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid)) pids->push_back(pid);
    }
    if (pids->size() >= lines) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == getpid()) continue;
    const std::string dir = entry.path().string();
    const std::string stat = ReadFile(dir + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    if (ReadFile(dir + "/cmdline").find(needle) != std::string::npos ||
        ReadFile(dir + "/environ").find(needle) != std::string::npos) {
      found.push_back(pid);
    }
  }
  return found;
}

bool GoneWithin(pid_t pid, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    if (kill(pid, 0) != 0) return true;
    // A zombie no longer runs; its parent (or init) reaps it.
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') {
      return true;
    }
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace gravac::runner

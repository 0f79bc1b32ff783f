// Helpers for tests that run the gravacrun binary: its argv for a FakeJob, and bounded waits on
// pid files and on processes ending.
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_TESTS_RUNNER_CLI_HELPERS_H_
#define GRAVAC_TESTS_RUNNER_CLI_HELPERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/runner/fake_job.h"

namespace gravac::runner {

// gravacrun (GRAVACRUN_BIN) -np np --nodes nodes with the FakeJob's stand-ins -- command.
std::vector<std::string> FakeJobArgs(const FakeJob& job, int np, int nodes,
                                     const std::vector<std::string>& command);

// Waits until the file at `path` holds at least `lines` pids (one a line); fills *pids.
bool WaitForLines(const std::string& path, size_t lines, absl::Duration limit,
                  std::vector<pid_t>* pids);

// Running processes (not zombies) whose command line or environment contains `needle`.
std::vector<pid_t> ProcessesMentioning(const std::string& needle);

// True once `pid` no longer runs (gone or a zombie), polling up to `limit`.
bool GoneWithin(pid_t pid, absl::Duration limit);

}  // namespace gravac::runner

#endif  // GRAVAC_TESTS_RUNNER_CLI_HELPERS_H_

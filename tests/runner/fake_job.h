// FakeJob: a scratch folder with stand-in gravac-controller and gravacd scripts for launcher
// tests that do not need the real binaries. The controller script prints "controller <args>",
// writes kPort to its --port_file (and kMetricsPort to its --metrics_port_file, if given) and
// waits; the daemon script prints "daemon <args>", creates its --socket path (a plain file),
// writes kDaemonMetricsPort + its --node_rank to its --metrics_port_file (if given) and waits.
// Both can be replaced (WriteController / WriteDaemon). Scripts see $port_file, $socket,
// $metrics_port_file, $metrics_address and $node_rank, and may call `write_metrics_port PORT`.
// The folder is removed when the FakeJob goes away.
//
// Thread-safety: not thread-safe.
#ifndef GRAVAC_TESTS_RUNNER_FAKE_JOB_H_
#define GRAVAC_TESTS_RUNNER_FAKE_JOB_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runner/options.h"

namespace gravac::runner {

class FakeJob {
 public:
  static constexpr int kPort = 4242;
  static constexpr int kMetricsPort = 4243;        // the stand-in controller's metrics port
  static constexpr int kDaemonMetricsPort = 4300;  // + node rank: the stand-in daemons

  static absl::StatusOr<FakeJob> Create();
  FakeJob() = default;
  FakeJob(FakeJob&& other) noexcept : dir_(std::move(other.dir_)) { other.dir_.clear(); }
  FakeJob& operator=(FakeJob&& other) noexcept;
  ~FakeJob();

  // Options that run the stand-ins, with run_dir in the scratch folder and short graces.
  RunnerOptions Options() const;

  // Controller script: `body` runs after $port_file is set from the arguments (it is not
  // written: the body must do it, e.g. `echo 4242 > "$port_file"`).
  absl::Status WriteController(std::string_view body) const;
  // Daemon script: `body` runs after the socket path was created and (unless
  // `write_metrics_port` is false, for a body that serves metrics itself) the metrics port written.
  absl::Status WriteDaemon(std::string_view body, bool write_metrics_port = true) const;

  std::string Path(std::string_view name) const;        // in the scratch folder
  std::string RunDirPath(std::string_view name) const;  // in the job's run folder
  std::string Read(std::string_view name) const;        // a scratch file's contents

 private:
  explicit FakeJob(std::string dir) : dir_(std::move(dir)) {}
  absl::Status WriteScript(std::string_view name, std::string_view body) const;
  std::string dir_;
};

}  // namespace gravac::runner

#endif  // GRAVAC_TESTS_RUNNER_FAKE_JOB_H_

// gravacrun: runs a gravac job on this machine (see launcher.h and options.h).
//
//   gravacrun -np 4 --nodes 2 -- ./train
//   gravacrun -np 4 --nodes 2 --link 10gbit,1ms --compressor dgc -- ./train
//   gravacrun -np 4 --nodes 2 --node 1 --daemon_socket /run/gravac/gravacd.sock -- ./train
//   gravacrun -np 4 -H localhost:4 --fusion-threshold-mb 32 -x OMP_NUM_THREADS=1 python train.py
//   gravacrun -np 8 -H host1:4,host2:4 --ssh-port 2222 -x PYTHONPATH python train.py
//
// horovodrun's flags are translated first (horovod_flags.h); -x NAME=VALUE is set in gravacrun's
// own environment, which every local process of the job inherits, and every -x variable is
// exported to the processes started over ssh.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/settings.h"
#include "runner/horovod_flags.h"
#include "runner/hosts.h"
#include "runner/launcher.h"
#include "runner/options.h"

int main(int argc, char** argv) {
  using namespace gravac::runner;  // NOLINT(build/namespaces)
  std::vector<const char*> raw(argv + 1, argv + argc);
  absl::StatusOr<HorovodTranslation> translated = TranslateHorovodArgs(raw);
  if (!translated.ok()) {
    absl::FPrintF(stderr, "gravacrun: %s\n", translated.status().message());
    return 2;
  }
  for (const std::string& note : translated->notes) {
    absl::FPrintF(stderr, "gravacrun: %s\n", note);
  }
  for (const auto& [name, value] : translated->env) {
    if (setenv(name.c_str(), value.c_str(), 1) != 0) {
      absl::FPrintF(stderr, "gravacrun: -x %s: cannot set it\n", name);
      return 2;
    }
  }
  const gravac::EnvLookup env = gravac::ProcessEnvironment();
  std::vector<const char*> args;
  for (const std::string& a : translated->args) args.push_back(a.c_str());
  absl::StatusOr<RunnerOptions> options = ParseRunnerArgs(args, env);
  if (!options.ok()) {
    absl::FPrintF(stderr, "gravacrun: %s\n", options.status().message());
    return 2;
  }
  if (options->help_requested) {
    std::fputs(RunnerHelp().c_str(), stdout);
    return 0;
  }
  for (const std::string& name : translated->forward) {
    if (std::optional<std::string> value = env(name)) options->remote_env.emplace_back(name, *value);
  }
  // Hosts reached over ssh look gravacd up themselves (ssh_launch.h); one is needed here only
  // when a node runs on this machine.
  const std::string hostname = LocalHostname();
  const bool local_node =
      options->hosts.empty() ||
      std::any_of(options->hosts.begin(), options->hosts.end(),
                  [&](const std::string& h) { return IsThisMachine(h, hostname); });
  if (options->node < 0) {  // the whole job: find the controller and gravacd to start
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string self_exe = len > 0 ? std::string(self, static_cast<size_t>(len)) : "";
    absl::StatusOr<std::string> gravacd =
        FindTool(options->gravacd_path, "gravacd", "daemon", self_exe, env);
    absl::StatusOr<std::string> controller =
        FindTool(options->controller_path, "gravac-controller", "controller", self_exe, env);
    const bool need_controller = options->hosts.empty() || options->controller.empty();
    for (const absl::Status& s : {local_node ? gravacd.status() : absl::OkStatus(),
                                  need_controller ? controller.status() : absl::OkStatus()}) {
      if (!s.ok()) {
        absl::FPrintF(stderr, "gravacrun: %s\n", s.message());
        return 2;
      }
    }
    // Hosts over ssh try the path given, else gravacd on their PATH, then where it is here.
    options->remote_gravacd = {options->gravacd_path.empty() ? "gravacd" : options->gravacd_path};
    if (options->gravacd_path.empty() && gravacd.ok()) options->remote_gravacd.push_back(*gravacd);
    if (gravacd.ok()) options->gravacd_path = *gravacd;
    if (controller.ok()) options->controller_path = *controller;
  }
  absl::StatusOr<int> rc = RunJob(*options);
  if (!rc.ok()) {
    absl::FPrintF(stderr, "gravacrun: %s\n", rc.status().ToString());
    return 1;
  }
  return *rc;
}

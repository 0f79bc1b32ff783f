// gravacrun: runs a gravac job on this machine (see launcher.h and options.h).
//
//   gravacrun -np 4 --nodes 2 -- ./train
//   gravacrun -np 4 --nodes 2 --link 10gbit,1ms --compressor dgc -- ./train
//   gravacrun -np 4 --nodes 2 --node 1 --daemon_socket /run/gravac/gravacd.sock -- ./train
//   gravacrun -np 4 -H localhost:4 --fusion-threshold-mb 32 -x OMP_NUM_THREADS=1 python train.py
//
// horovodrun's flags are translated first (horovod_flags.h); -x NAME=VALUE is set in gravacrun's
// own environment, which every process of the job inherits.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/settings.h"
#include "runner/horovod_flags.h"
#include "runner/launcher.h"
#include "runner/options.h"

int main(int argc, char** argv) {
  using namespace gravac::runner;  // NOLINT(build/namespaces)
  char hostname[256] = {0};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) hostname[0] = '\0';
  std::vector<const char*> raw(argv + 1, argv + argc);
  absl::StatusOr<HorovodTranslation> translated = TranslateHorovodArgs(raw, hostname);
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
  if (options->node < 0) {  // the whole job: find the controller and gravacd to start
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string self_exe = len > 0 ? std::string(self, static_cast<size_t>(len)) : "";
    absl::StatusOr<std::string> gravacd =
        FindTool(options->gravacd_path, "gravacd", "daemon", self_exe, env);
    absl::StatusOr<std::string> controller =
        FindTool(options->controller_path, "gravac-controller", "controller", self_exe, env);
    for (const absl::Status& s : {gravacd.status(), controller.status()}) {
      if (!s.ok()) {
        absl::FPrintF(stderr, "gravacrun: %s\n", s.message());
        return 2;
      }
    }
    options->gravacd_path = *gravacd;
    options->controller_path = *controller;
  }
  absl::StatusOr<int> rc = RunJob(*options);
  if (!rc.ok()) {
    absl::FPrintF(stderr, "gravacrun: %s\n", rc.status().ToString());
    return 1;
  }
  return *rc;
}

// horovodrun's command line on gravacrun: a pass over argv that rewrites horovodrun's flags into
// gravacrun's own before ParseRunnerArgs (options.h) reads them, so that
//
//   horovodrun -np 4 -H localhost:4 --fusion-threshold-mb 32 -x NCCL_DEBUG=INFO python train.py
//
// runs unchanged as `gravacrun ...`. Each horovodrun flag either maps to a gravacrun setting
// (--fusion-threshold-mb 32 -> --fusion_threshold_bytes 33554432, --cycle-time-ms,
// --start-timeout, --network-interface(s), --log-level, --stall-check-warning-time-seconds,
// --no-stall-check, --verbose, --num-proc), is accepted with a note because gravac needs nothing
// for it (--gloo, --mpi, --tcp, --hierarchical-allreduce/allgather, --disable-cache,
// --cache-capacity, --log-hide-timestamp), sets the workers' environment (-x NAME[=VALUE]), or is
// refused with a message naming the flag, why, and what to use instead (--timeline-mark-cycles,
// autotuning, elastic training, --output-filename, ...). -H / --hosts, --hostfile, -p /
// --ssh-port and -i / --ssh-identity-file become gravacrun's --hosts, --hostfile, --ssh_port and
// --ssh_identity_file (a multi-host job over ssh; hosts.h, ssh_launch.h). As horovodrun, the worker
// command may start at the first word that is not a flag or a flag's value; "--" is inserted there.
//
// Thread-safety: stateless functions over immutable values.
#ifndef GRAVAC_RUNNER_HOROVOD_FLAGS_H_
#define GRAVAC_RUNNER_HOROVOD_FLAGS_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gravac::runner {

struct HorovodTranslation {
  std::vector<std::string> args;  // gravacrun's argv (no program name), "--" before the command
  // -x NAME=VALUE: variables to set for every process of the job (local children inherit them).
  std::vector<std::pair<std::string, std::string>> env;
  // Every -x NAME[=VALUE]'s NAME, in order: the variables sent to processes started over ssh.
  std::vector<std::string> forward;
  std::vector<std::string> notes;  // one line per flag accepted with no effect, for stderr
};

// Translates argv (without the program name). Fails with InvalidArgument naming the flag for a
// refused horovodrun flag, a flag missing its value or a bad number. Hosts are checked later, by
// ParseRunnerArgs.
absl::StatusOr<HorovodTranslation> TranslateHorovodArgs(absl::Span<const char* const> args);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_HOROVOD_FLAGS_H_

// Hosts of a multi-host job: Horovod's and Open MPI's host lists, and how ranks fill them.
//
//   -H host1:4,host2:4          Horovod's list (slots default to 1)
//   --hostfile FILE             one host a line: "host:4" (Horovod), "host slots=4 [max_slots=8]"
//                               (Open MPI) or "host" (1 slot); '#' starts a comment
//
// Ranks fill the hosts in the order listed, as horovodrun does: host 0 gets ranks
// 0..slots0-1, and so on, until -np ranks are placed (hosts left without a rank run nothing).
// A host named localhost, 127.0.0.1, ::1 or this machine's hostname runs here without ssh;
// every other host is reached over ssh (ssh_launch.h).
//
// Thread-safety: stateless functions over immutable values.
#ifndef GRAVAC_RUNNER_HOSTS_H_
#define GRAVAC_RUNNER_HOSTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gravac::runner {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// Parses Horovod's "-H h1:4,h2:4". Fails with InvalidArgument naming the host for bad slots, and
// for an empty list.
absl::StatusOr<std::vector<HostSlots>> ParseHostList(std::string_view text);

// Parses a hostfile's text (`path` only names it in errors). Fails with InvalidArgument naming the
// line's host for bad slots or an unknown word, and for a file without hosts.
absl::StatusOr<std::vector<HostSlots>> ParseHostfileText(std::string_view text,
                                                         std::string_view path);
// Reads and parses the hostfile at `path` (InvalidArgument if it cannot be read).
absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path);

// Places `np` ranks on `hosts` in order (np 0 = every slot). Returns the ranks per used host (the
// hosts that get none are dropped from `*hosts`); fails with InvalidArgument when np exceeds the
// slots, naming both.
absl::StatusOr<std::vector<int>> FillHosts(std::vector<HostSlots>* hosts, int np);

// True for a host that is this machine: localhost, 127.0.0.1, ::1 or `hostname`.
bool IsThisMachine(std::string_view host, std::string_view hostname);

// This machine's hostname ("" if it cannot be read).
std::string LocalHostname();

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_HOSTS_H_

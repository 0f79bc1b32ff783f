// RunInNetns: runs a function on a fresh thread that has joined a named network namespace.
// EnterNetns: moves a (forked, single-threaded) process into one.
//
// Sockets are bound to the namespace of the thread that creates them and keep it afterwards, so
// tests and tools can open a listening socket in one node of an emulated cluster and connect to it
// from another without spawning processes. The calling thread's namespace is never changed.
//
// Blocks until `fn` returns; returns fn's status, or the errno status of opening
// /run/netns/<netns> or of setns (PermissionDenied without CAP_SYS_ADMIN).
// Thread-safety: safe to call from any thread.
#ifndef GRAVAC_NETEMU_NETNS_H_
#define GRAVAC_NETEMU_NETNS_H_

#include <functional>
#include <string_view>

#include "absl/status/status.h"

namespace gravac::netemu {

absl::Status RunInNetns(std::string_view netns, const std::function<absl::Status()>& fn);

// Moves the whole calling process into `netns` the way `ip netns exec` does: joins the network
// namespace, then gives the process a private mount namespace with /sys remounted, so
// /sys/class/net lists the namespace's interfaces (UCX and iproute2 read it). For a freshly forked,
// single-threaded child (setns of the network namespace applies to the calling thread only).
absl::Status EnterNetns(std::string_view netns);

}  // namespace gravac::netemu

#endif  // GRAVAC_NETEMU_NETNS_H_

// Unix stream sockets for the worker <-> daemon link.
//
// ListenUnix creates the daemon's listening socket with a restricted mode (0600, or 0660 and a
// group) before it starts accepting, so no other user can connect in between; it refuses a path
// where a live server answers (AlreadyExists) and replaces a stale socket file (one nobody listens
// on). ConnectUnix retries until the server is there or the timeout passes.
//
// Thread-safety: stateless functions. Blocking: ConnectUnix blocks up to its timeout.
#ifndef GRAVAC_CORE_IPC_UNIX_SOCKET_H_
#define GRAVAC_CORE_IPC_UNIX_SOCKET_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ipc/unique_fd.h"

namespace gravac::ipc {

struct ListenOptions {
  std::string path;
  std::string group;  // "" = mode 0600; else mode 0660 and this group
  bool nonblocking = true;
};

// Fails with AlreadyExists when a server answers on `path`, FailedPrecondition when the path
// exists and is not a socket, InvalidArgument for a path too long or an unknown group.
absl::StatusOr<UniqueFd> ListenUnix(const ListenOptions& options);

// Connects (blocking socket); retries ENOENT / ECONNREFUSED until `timeout` (Unavailable then).
absl::StatusOr<UniqueFd> ConnectUnix(std::string_view path, absl::Duration timeout);

// Makes a socket pair (blocking, close-on-exec), for tests.
absl::Status SocketPair(UniqueFd* a, UniqueFd* b);

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_UNIX_SOCKET_H_

// The credentials of the process at the other end of a Unix socket (SO_PEERCRED), and the check
// the daemon applies to every worker that connects: the peer must run as the daemon's own user,
// as root, or (when the socket is shared with a group) as a member of that group.
//
// The socket file's mode (0600 / 0660 + group, core/ipc/unix_socket.h) already keeps others out;
// this check holds even where the file's permissions were widened by hand or the socket was
// passed on.
//
// Thread-safety: stateless functions. Nothing blocks except the group database look-ups.
#ifndef GRAVAC_CORE_IPC_PEER_CREDENTIALS_H_
#define GRAVAC_CORE_IPC_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::ipc {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Who may connect: `uid` (the daemon's effective user) and root always; members of `group` too
// when it is set.
struct PeerPolicy {
  uid_t uid = 0;
  std::optional<gid_t> group;
};

// The group id of `name`; InvalidArgument for an unknown group.
absl::StatusOr<gid_t> LookupGroupId(const std::string& name);

// The policy of a daemon running as this process's effective user and sharing its socket with
// `group` ("" = no group). InvalidArgument for an unknown group.
absl::StatusOr<PeerPolicy> PolicyForThisUser(const std::string& group);

// SO_PEERCRED of a connected Unix socket; Internal with the errno text when it fails.
absl::StatusOr<PeerCredentials> GetPeerCredentials(int sock);

// OK when `peer` may connect under `policy`; PermissionDenied naming the peer's pid, uid and gid
// otherwise. Group membership counts the peer's primary group and its user's supplementary
// groups (getgrouplist).
absl::Status CheckPeer(const PeerCredentials& peer, const PeerPolicy& policy);

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_PEER_CREDENTIALS_H_

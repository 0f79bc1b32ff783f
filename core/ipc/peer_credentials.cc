#include "core/ipc/peer_credentials.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/errno_status.h"

namespace gravac::ipc {
namespace {

// True when the user `uid` belongs to `group` through its supplementary groups.
bool UserInGroup(uid_t uid, gid_t primary, gid_t group) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* result = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return false;
  }
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (::getgrouplist(pw.pw_name, primary, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    if (::getgrouplist(pw.pw_name, primary, groups.data(), &count) < 0) return false;
  }
  groups.resize(static_cast<size_t>(count));
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

}  // namespace

absl::StatusOr<gid_t> LookupGroupId(const std::string& name) {
  std::vector<char> buf(16384);
  group g;
  group* result = nullptr;
  if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown socket group '%s'", name));
  }
  return result->gr_gid;
}

absl::StatusOr<PeerPolicy> PolicyForThisUser(const std::string& group) {
  PeerPolicy policy;
  policy.uid = ::geteuid();
  if (!group.empty()) {
    absl::StatusOr<gid_t> gid = LookupGroupId(group);
    if (!gid.ok()) return gid.status();
    policy.group = *gid;
  }
  return policy;
}

absl::StatusOr<PeerCredentials> GetPeerCredentials(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus(absl::StatusCode::kInternal, errno, "getsockopt(SO_PEERCRED)");
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

absl::Status CheckPeer(const PeerCredentials& peer, const PeerPolicy& policy) {
  if (peer.uid == policy.uid || peer.uid == 0) return absl::OkStatus();
  if (policy.group.has_value() &&
      (peer.gid == *policy.group || UserInGroup(peer.uid, peer.gid, *policy.group))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrFormat(
      "process %d (uid %d, gid %d) may not use this daemon: it runs as uid %d%s", peer.pid,
      peer.uid, peer.gid, policy.uid,
      policy.group.has_value() ? absl::StrFormat(" and admits group %d", *policy.group)
                               : std::string(" and admits no group (see --socket_group)")));
}

}  // namespace gravac::ipc

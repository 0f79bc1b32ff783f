#include "core/ipc/unix_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/errno_status.h"
#include "core/ipc/peer_credentials.h"

namespace gravac::ipc {
namespace {

// A failed socket call on `path`: Unavailable (the daemon is not there) whatever errno says.
absl::Status Errno(std::string_view what, std::string_view path, int err) {
  return ErrnoStatus(absl::StatusCode::kUnavailable, err, absl::StrFormat("%s '%s'", what, path));
}

absl::StatusOr<sockaddr_un> Address(std::string_view path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "socket path '%s' is empty or longer than %d bytes", path, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// 0: nobody listens (stale or absent), 1: a server answers.
absl::StatusOr<bool> ServerAnswers(const sockaddr_un& addr, std::string_view path) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return Errno("socket", path, errno);
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return true;
  }
  if (errno == ECONNREFUSED || errno == ENOENT) return false;
  if (errno == EAGAIN) return true;  // backlog full: someone listens
  return Errno("probe connect", path, errno);
}

}  // namespace

absl::StatusOr<UniqueFd> ListenUnix(const ListenOptions& options) {
  const std::string& path = options.path;
  auto addr_or = Address(path);
  if (!addr_or.ok()) return addr_or.status();
  const sockaddr_un addr = *addr_or;
  gid_t gid = 0;
  if (!options.group.empty()) {
    auto gid_or = LookupGroupId(options.group);
    if (!gid_or.ok()) return gid_or.status();
    gid = *gid_or;
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrFormat("'%s' exists and is not a socket; refusing to replace it", path));
    }
    auto answers = ServerAnswers(addr, path);
    if (!answers.ok()) return answers.status();
    if (*answers) {
      return absl::AlreadyExistsError(absl::StrFormat("another daemon is listening on '%s'", path));
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Errno("unlink stale socket", path, errno);
    }
  }
  int type = SOCK_STREAM | SOCK_CLOEXEC | (options.nonblocking ? SOCK_NONBLOCK : 0);
  UniqueFd fd(::socket(AF_UNIX, type, 0));
  if (!fd.valid()) return Errno("socket", path, errno);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrFormat("another daemon bound '%s' at the same time", path));
    }
    return Errno("bind", path, errno);
  }
  // Restrict the file before listen(): until then nobody can connect.
  const mode_t mode = options.group.empty() ? 0600 : 0660;
  if (!options.group.empty() && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Errno(absl::StrFormat("chgrp %s", options.group), path, err);
  }
  if (::chmod(path.c_str(), mode) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Errno("chmod", path, err);
  }
  if (::listen(fd.get(), 128) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Errno("listen", path, err);
  }
  return fd;
}

absl::StatusOr<UniqueFd> ConnectUnix(std::string_view path, absl::Duration timeout) {
  auto addr_or = Address(path);
  if (!addr_or.ok()) return addr_or.status();
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Errno("socket", path, errno);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr_or), sizeof(sockaddr_un)) ==
        0) {
      return fd;
    }
    const int err = errno;
    if (err != ENOENT && err != ECONNREFUSED && err != EAGAIN && err != EINTR) {
      return Errno("connect to daemon socket", path, err);
    }
    if (absl::Now() + backoff > deadline) {
      return absl::UnavailableError(absl::StrFormat("no daemon listening on '%s' after %s (%s)",
                                                    path, absl::FormatDuration(timeout),
                                                    ErrnoText(err)));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(100));
  }
}

absl::Status SocketPair(UniqueFd* a, UniqueFd* b) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Errno("socketpair", "", errno);
  }
  a->Reset(fds[0]);
  b->Reset(fds[1]);
  return absl::OkStatus();
}

}  // namespace gravac::ipc

#include "netemu/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "netemu/process.h"

namespace gravac::netemu {
namespace {

absl::Status JoinAndRun(const std::string& path, const std::function<absl::Status()>& fn) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return ErrnoCallStatus(errno, absl::StrCat("open(", path, ")"), __FILE__, __LINE__);
  absl::Cleanup close_fd = [fd] { close(fd); };
  GRAVAC_RETURN_IF_ERRNO(setns(fd, CLONE_NEWNET));
  return fn();
}

}  // namespace

absl::Status RunInNetns(std::string_view netns, const std::function<absl::Status()>& fn) {
  if (netns.empty() || netns.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(gravac::StrCat("bad network namespace name '", netns, "'"));
  }
  const std::string path = gravac::StrCat("/run/netns/", netns);
  absl::Status status;
  std::thread worker([&] { status = JoinAndRun(path, fn); });
  worker.join();
  return status;
}

absl::Status EnterNetns(std::string_view netns) {
  if (netns.empty() || netns.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(gravac::StrCat("bad network namespace name '", netns, "'"));
  }
  const std::string path = gravac::StrCat("/run/netns/", netns);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return ErrnoCallStatus(errno, gravac::StrCat("open(", path, ")"), __FILE__, __LINE__);
  absl::Cleanup close_fd = [fd] { close(fd); };
  GRAVAC_RETURN_IF_ERRNO(setns(fd, CLONE_NEWNET));
  GRAVAC_RETURN_IF_ERRNO(unshare(CLONE_NEWNS));
  // Keep mount events from propagating back to the parent namespace, then swap in a /sys that
  // belongs to the new network namespace.
  GRAVAC_RETURN_IF_ERRNO(mount("none", "/", nullptr, MS_SLAVE | MS_REC, nullptr));
  if (umount2("/sys", MNT_DETACH) == -1 && errno != EINVAL) {  // EINVAL: /sys was not mounted
    return ErrnoCallStatus(errno, "umount2(\"/sys\", MNT_DETACH)", __FILE__, __LINE__);
  }
  const std::string source(netns);
  GRAVAC_RETURN_IF_ERRNO(mount(source.c_str(), "/sys", "sysfs", 0, nullptr));
  return absl::OkStatus();
}

}  // namespace gravac::netemu

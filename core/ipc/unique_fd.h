// UniqueFd: owns a file descriptor and closes it on destruction (move-only).
//
// Thread-safety: like a plain value; one owner at a time.
#ifndef GRAVAC_CORE_IPC_UNIQUE_FD_H_
#define GRAVAC_CORE_IPC_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace gravac::ipc {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_UNIQUE_FD_H_

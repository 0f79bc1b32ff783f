#include "core/ipc/framing.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "core/errno_status.h"

namespace gravac::ipc {
namespace {

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

absl::Status SendFrame(int sock, std::string_view payload, absl::Span<const int> fds,
                       absl::Duration timeout) {
  if (payload.size() > kMaxFramePayload) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame payload of %d bytes exceeds %d", payload.size(), kMaxFramePayload));
  }
  if (fds.size() > kMaxFrameFds) {
    return absl::InvalidArgumentError(
        absl::StrFormat("frame with %d fds exceeds %d", fds.size(), kMaxFrameFds));
  }
  uint8_t header[kFrameHeaderBytes];
  PutU32(header, static_cast<uint32_t>(payload.size()));
  PutU32(header + 4, static_cast<uint32_t>(fds.size()));

  iovec iov[2];
  size_t total = kFrameHeaderBytes + payload.size();
  size_t sent = 0;
  bool fds_sent = fds.empty();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFrameFds)];
  const absl::Time deadline = absl::Now() + timeout;
  while (sent < total) {
    int n_iov = 0;
    if (sent < kFrameHeaderBytes) {
      iov[n_iov++] = {header + sent, kFrameHeaderBytes - sent};
      if (!payload.empty()) iov[n_iov++] = {const_cast<char*>(payload.data()), payload.size()};
    } else {
      size_t off = sent - kFrameHeaderBytes;
      iov[n_iov++] = {const_cast<char*>(payload.data()) + off, payload.size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    if (!fds_sent) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "socket had no room for a frame for %s", absl::FormatDuration(timeout)));
        }
        pollfd p{sock, POLLOUT, 0};
        ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
        continue;
      }
      return ErrnoStatus(absl::StatusCode::kUnavailable, errno, "sendmsg");
    }
    fds_sent = true;
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FrameReader::ReadSome(int sock) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > (1u << 16)) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  char chunk[64 * 1024];
  iovec iov{chunk, sizeof(chunk)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFrameFds * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == ECONNRESET) return false;
    return ErrnoStatus(absl::StatusCode::kUnavailable, errno, "recvmsg");
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    return absl::DataLossError("received more file descriptors than a frame may carry");
  }
  if (n == 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

absl::StatusOr<std::optional<Frame>> FrameReader::Next() {
  if (buffered() < kFrameHeaderBytes) return std::optional<Frame>();
  const char* p = buffer_.data() + consumed_;
  const uint32_t payload_bytes = GetU32(p);
  const uint32_t fd_count = GetU32(p + 4);
  if (payload_bytes > kMaxFramePayload || fd_count > kMaxFrameFds) {
    return absl::DataLossError(absl::StrFormat("malformed frame header: %d payload bytes, %d fds",
                                               payload_bytes, fd_count));
  }
  if (buffered() < kFrameHeaderBytes + payload_bytes) return std::optional<Frame>();
  if (fds_.size() < fd_count) {
    return absl::DataLossError(
        absl::StrFormat("frame announces %d fds but %d were received", fd_count, fds_.size()));
  }
  Frame frame;
  frame.payload.assign(p + kFrameHeaderBytes, payload_bytes);
  for (uint32_t i = 0; i < fd_count; ++i) {
    frame.fds.push_back(std::move(fds_.front()));
    fds_.pop_front();
  }
  consumed_ += kFrameHeaderBytes + payload_bytes;
  return std::optional<Frame>(std::move(frame));
}

}  // namespace gravac::ipc

// Framed messages over a Unix stream socket, with file descriptors (SCM_RIGHTS).
//
// A frame is a FrameHeader {uint32 payload_bytes, uint32 fd_count} (little endian) followed by
// the payload (a serialized protobuf of proto/gravac/v1/worker.proto; this layer does not look
// inside). The frame's fds are sent as ancillary data with its first byte; the receiver queues
// every fd it receives and hands a frame the next fd_count of them once the frame is complete
// (fds arrive no later than the first byte of their frame). Payloads are at most
// kMaxFramePayload bytes and frames carry at most kMaxFrameFds fds; a peer that violates either
// is a protocol error (the connection should be dropped).
//
// Thread-safety: SendFrame may be called from several threads on one socket only under the
// caller's lock (a frame must not interleave with another). A FrameReader is used by one thread.
// Blocking: SendFrame blocks until the frame is written (waiting at most `timeout` for room on a
// non-blocking socket); FrameReader::ReadSome blocks only when the socket is blocking.
#ifndef GRAVAC_CORE_IPC_FRAMING_H_
#define GRAVAC_CORE_IPC_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/ipc/unique_fd.h"

namespace gravac::ipc {

inline constexpr uint32_t kMaxFramePayload = 1u << 20;
inline constexpr uint32_t kMaxFrameFds = 4;
inline constexpr size_t kFrameHeaderBytes = 8;

struct Frame {
  std::string payload;
  std::vector<UniqueFd> fds;
};

// Writes one frame. Fails with Unavailable when the peer is gone, DeadlineExceeded when the
// socket had no room for `timeout`, InvalidArgument for an oversized payload or too many fds.
absl::Status SendFrame(int sock, std::string_view payload, absl::Span<const int> fds = {},
                       absl::Duration timeout = absl::Seconds(10));

class FrameReader {
 public:
  // Reads what the socket has (one recvmsg). Returns false at end of stream (peer closed),
  // true otherwise (also when nothing was available on a non-blocking socket). Errors: the
  // socket's errno (Unavailable) or a malformed frame header (DataLoss).
  absl::StatusOr<bool> ReadSome(int sock);
  // The next complete frame, or nullopt when none is buffered yet. DataLoss when a complete
  // frame announces more fds than were received.
  absl::StatusOr<std::optional<Frame>> Next();
  // Bytes buffered that do not form a complete frame yet.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
  std::deque<UniqueFd> fds_;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_FRAMING_H_

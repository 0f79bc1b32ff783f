// libFuzzer target: what a worker sends gravacd on its Unix socket (core/ipc/framing.h frames of
// proto/gravac/v1/worker.proto messages), read the way WorkerServer reads it: the bytes go
// through a real socketpair into FrameReader, every complete frame is parsed as a
// WorkerMessage, and a Request goes through SpecFromRequest (daemon/local/local_reduce.h), the
// check that stands between a worker's request and the daemon's memory. Checks: nothing crashes;
// a frame never claims more than kMaxFramePayload; an accepted spec's shape holds exactly the
// bytes the request names (no overflow in the element count).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "core/ipc/framing.h"
#include "daemon/collectives/communicator.h"
#include "daemon/local/local_reduce.h"
#include "gravac/v1/worker.pb.h"

namespace {

// The exact byte count of `shape` elements of `elem` bytes, or false when it overflows.
bool ExactBytes(absl::Span<const int64_t> shape, uint64_t elem, uint64_t* bytes) {
  unsigned __int128 n = elem;
  for (int64_t d : shape) {
    if (d < 0) return false;
    n *= static_cast<uint64_t>(d);
    if (n > UINT64_MAX) return false;
  }
  *bytes = static_cast<uint64_t>(n);
  return true;
}

void CheckMessage(const std::string& payload) {
  gravac::v1::WorkerMessage msg;
  if (!msg.ParseFromString(payload) || !msg.has_request()) return;
  absl::StatusOr<gravac::daemon::TensorSpec> spec =
      gravac::daemon::SpecFromRequest(msg.request(), /*rank=*/3);
  if (!spec.ok()) return;
  uint64_t bytes = 0;
  if (!ExactBytes(spec->shape, gravac::collectives::DataTypeSize(spec->dtype), &bytes) ||
      bytes != msg.request().bytes()) {
    std::abort();  // the daemon would trust a shape that does not match the posted bytes
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  gravac::ipc::FrameReader reader;
  size_t at = 0;
  bool open = true;
  while (open) {
    // Feed in chunks as the daemon's non-blocking reads would see them.
    if (at < size) {
      const size_t chunk = std::min<size_t>(size - at, 4096);
      if (::write(sv[1], data + at, chunk) != static_cast<ssize_t>(chunk)) break;
      at += chunk;
      if (at == size) ::shutdown(sv[1], SHUT_WR);
    } else if (size == 0) {
      ::shutdown(sv[1], SHUT_WR);
    }
    absl::StatusOr<bool> more = reader.ReadSome(sv[0]);
    if (!more.ok()) break;
    open = *more;
    while (true) {
      absl::StatusOr<std::optional<gravac::ipc::Frame>> frame = reader.Next();
      if (!frame.ok() || !frame->has_value()) break;
      if ((*frame)->payload.size() > gravac::ipc::kMaxFramePayload) std::abort();
      CheckMessage((*frame)->payload);
    }
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}

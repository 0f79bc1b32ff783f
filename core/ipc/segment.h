// ShmSegment: a memfd-backed shared-memory segment with the ABI header of shm_abi.h, mapped into
// this process (RAII: unmapped and closed on destruction). The creator (Create) writes the
// header and seals the memfd against resizing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL); the
// other side maps the fd it received (Map), which refuses a segment without those seals (a peer
// that could shrink the file under the mapping would make our accesses fault with SIGBUS) and
// validates the header.
//
// Thread-safety: the object is a move-only value; concurrent access to the mapped bytes is the
// users' protocol (the request/response exchange orders it).
#ifndef GRAVAC_CORE_IPC_SEGMENT_H_
#define GRAVAC_CORE_IPC_SEGMENT_H_

#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/ipc/shm_abi.h"
#include "core/ipc/unique_fd.h"

namespace gravac::ipc {

// Seals every segment carries: its size is fixed for its whole life.
inline constexpr int kShmRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// OK when `fd` is a memfd with kShmRequiredSeals; InvalidArgument naming what is missing.
absl::Status CheckShmSeals(int fd);

class ShmSegment {
 public:
  // Creates a memfd named `name` (for /proc/PID/fd listings) with room for `data_bytes` bytes of
  // data after the header, maps it read-write and writes the header.
  static absl::StatusOr<ShmSegment> Create(std::string_view name, uint64_t data_bytes);
  // Maps a segment received from the other side (takes the fd): InvalidArgument when it is not
  // a memfd sealed with kShmRequiredSeals or its header is invalid.
  static absl::StatusOr<ShmSegment> Map(UniqueFd fd, bool writable);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  bool valid() const { return base_ != nullptr; }
  int fd() const { return fd_.get(); }
  uint64_t segment_bytes() const { return segment_bytes_; }
  uint64_t data_bytes() const { return segment_bytes_ - kShmDataOffset; }
  uint8_t* data() const { return static_cast<uint8_t*>(base_) + kShmDataOffset; }
  const ShmSegmentHeader& header() const { return *static_cast<ShmSegmentHeader*>(base_); }

 private:
  void Unmap();
  UniqueFd fd_;
  void* base_ = nullptr;
  uint64_t segment_bytes_ = 0;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_SEGMENT_H_

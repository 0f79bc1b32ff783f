// The shared-memory ABI between workers (client library) and the daemon: the only C-style ABI of
// gravac. Every segment (a memfd mapped by both sides) starts with a ShmSegmentHeader, a POD of
// fixed layout; the tensor data follows at header.data_offset (page aligned). Both sides check
// magic, version and sizes before trusting a segment (ValidateShmHeader), so a worker built
// against another ABI version, a truncated file or a foreign fd is refused with a clear error.
//
// Thread-safety: plain data and a stateless check.
#ifndef GRAVAC_CORE_IPC_SHM_ABI_H_
#define GRAVAC_CORE_IPC_SHM_ABI_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"

namespace gravac::ipc {

inline constexpr uint64_t kShmMagic = 0x314d485343415247ull;  // "GRACSHM1" little endian
inline constexpr uint32_t kShmAbiVersion = 1;
// Data starts one page after the segment's start.
inline constexpr uint64_t kShmDataOffset = 4096;

extern "C" {
struct ShmSegmentHeader {
  uint64_t magic;          // kShmMagic
  uint32_t version;        // kShmAbiVersion
  uint32_t header_bytes;   // sizeof(ShmSegmentHeader)
  uint64_t segment_bytes;  // whole segment size, header included (= the file size)
  uint64_t data_offset;    // kShmDataOffset
  uint64_t data_bytes;     // segment_bytes - data_offset
  uint64_t reserved[3];    // zero
};
}

static_assert(std::is_standard_layout_v<ShmSegmentHeader> &&
              std::is_trivially_copyable_v<ShmSegmentHeader>);
static_assert(sizeof(ShmSegmentHeader) == 64, "ShmSegmentHeader layout is part of the ABI");

// A header for a segment of `segment_bytes` (must be > kShmDataOffset).
ShmSegmentHeader MakeShmHeader(uint64_t segment_bytes);

// Checks the header at the start of a mapping of `mapped_bytes` bytes: magic, version,
// header_bytes, data_offset, data_bytes and segment_bytes == mapped_bytes. InvalidArgument names
// the field that is wrong.
absl::Status ValidateShmHeader(const void* base, uint64_t mapped_bytes);

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_SHM_ABI_H_

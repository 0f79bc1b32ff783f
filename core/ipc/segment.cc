#include "core/ipc/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/errno_status.h"

namespace gravac::ipc {
namespace {

}  // namespace

ShmSegmentHeader MakeShmHeader(uint64_t segment_bytes) {
  ShmSegmentHeader h{};
  h.magic = kShmMagic;
  h.version = kShmAbiVersion;
  h.header_bytes = sizeof(ShmSegmentHeader);
  h.segment_bytes = segment_bytes;
  h.data_offset = kShmDataOffset;
  h.data_bytes = segment_bytes - kShmDataOffset;
  return h;
}

absl::Status ValidateShmHeader(const void* base, uint64_t mapped_bytes) {
  if (mapped_bytes < kShmDataOffset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shared-memory segment of %d bytes is smaller than its header page", mapped_bytes));
  }
  ShmSegmentHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (h.magic != kShmMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment: bad magic 0x%016x", h.magic));
  }
  if (h.version != kShmAbiVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shared-memory segment: ABI version %d, this side speaks %d", h.version, kShmAbiVersion));
  }
  if (h.header_bytes != sizeof(ShmSegmentHeader)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment: header_bytes %d, expected %d", h.header_bytes,
                        sizeof(ShmSegmentHeader)));
  }
  if (h.segment_bytes != mapped_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment: segment_bytes %d but the file has %d bytes",
                        h.segment_bytes, mapped_bytes));
  }
  if (h.data_offset != kShmDataOffset || h.data_bytes != h.segment_bytes - h.data_offset) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment: data_offset %d / data_bytes %d inconsistent",
                        h.data_offset, h.data_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShmSegment> ShmSegment::Create(std::string_view name, uint64_t data_bytes) {
  std::string n(name);
  UniqueFd fd(::memfd_create(n.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return ErrnoStatus(absl::StatusCode::kInternal, errno, "memfd_create");
  const uint64_t total = kShmDataOffset + data_bytes;
  if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) {
    return ErrnoStatus(absl::StatusCode::kInternal, errno, absl::StrFormat("ftruncate memfd to %d bytes", total));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, kShmRequiredSeals) != 0) {
    return ErrnoStatus(absl::StatusCode::kInternal, errno, "sealing the memfd (F_ADD_SEALS)");
  }
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return ErrnoStatus(absl::StatusCode::kInternal, errno, absl::StrFormat("mmap %d bytes", total));
  ShmSegment s;
  s.fd_ = std::move(fd);
  s.base_ = base;
  s.segment_bytes_ = total;
  ShmSegmentHeader h = MakeShmHeader(total);
  std::memcpy(base, &h, sizeof(h));
  return s;
}

absl::Status CheckShmSeals(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return ErrnoStatus(absl::StatusCode::kInvalidArgument, errno,
                       "shared-memory segment is not a sealable memfd (F_GET_SEALS)");
  }
  if ((seals & kShmRequiredSeals) != kShmRequiredSeals) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment is not sealed against resizing (seals 0x%x, need "
                        "F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL = 0x%x)",
                        seals, kShmRequiredSeals));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShmSegment> ShmSegment::Map(UniqueFd fd, bool writable) {
  // Seals first: once F_SEAL_SHRINK|F_SEAL_SEAL are on, the size read below is final, so no
  // access inside the mapping can fault (SIGBUS) however the other side behaves.
  if (absl::Status sealed = CheckShmSeals(fd.get()); !sealed.ok()) return sealed;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(absl::StatusCode::kInternal, errno, "fstat segment fd");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kShmDataOffset) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shared-memory segment of %d bytes is smaller than its header page", size));
  }
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* base = ::mmap(nullptr, size, prot, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return ErrnoStatus(absl::StatusCode::kInternal, errno, absl::StrFormat("mmap %d bytes", size));
  ShmSegment s;
  s.fd_ = std::move(fd);
  s.base_ = base;
  s.segment_bytes_ = size;
  if (absl::Status st2 = ValidateShmHeader(base, size); !st2.ok()) return st2;
  return s;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      segment_bytes_(std::exchange(other.segment_bytes_, 0)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    segment_bytes_ = std::exchange(other.segment_bytes_, 0);
  }
  return *this;
}

ShmSegment::~ShmSegment() { Unmap(); }

void ShmSegment::Unmap() {
  if (base_ != nullptr) ::munmap(base_, segment_bytes_);
  base_ = nullptr;
  segment_bytes_ = 0;
  fd_.Reset();
}

}  // namespace gravac::ipc

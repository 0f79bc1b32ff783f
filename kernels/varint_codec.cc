#include "kernels/varint_codec.h"

#include "absl/strings/str_format.h"

namespace gravac::kernels::internal {

absl::Status GapError(const char* who, int64_t i, size_t pos, size_t n, uint64_t gap, int64_t index,
                      bool last_zero, int64_t dense_size) {
  if (n > kMaxVarintBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d is longer than %d bytes", who, i, pos, kMaxVarintBytes));
  }
  if (last_zero) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d is not minimally encoded (%d bytes, last is 0)", who, i,
        pos, n));
  }
  if (gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d holds gap %d, which overflows int32 (max %d)", who, i, pos,
        gap, std::numeric_limits<int32_t>::max()));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: index %d at position %d is outside [0, dense_size = %d)", who, index, i, dense_size));
}

absl::Status GapPastEndError(const char* who, int64_t i, size_t pos, size_t len) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: varint %d at stream byte %d runs past the end of the %d-byte index stream", who, i, pos,
      len));
}

absl::Status GapTrailingError(const char* who, int64_t count, size_t pos, size_t len) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: trailing bytes in the index stream: the %d varints end at byte %d, stream_bytes is %d",
      who, count, pos, len));
}

}  // namespace gravac::kernels::internal

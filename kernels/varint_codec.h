// The varint codec of the wire format's layout 3 (wire_format.h): strictly ascending int32
// indices as unsigned LEB128 varints of their gaps (idx[0], then idx[i] - idx[i-1] - 1), 7 bits a
// byte, low group first, high bit = more bytes follow, each minimal and at most 5 bytes.
//
//   ScanGaps         one branch-free pass: are the indices valid, how long is their stream
//   PutGaps          writes the stream (8 writable bytes past its end: one store a varint)
//   ForEachGapIndex  decodes and checks a stream completely, calling f(i, index) for each
//
// These are inline (the encoder and decoder loops are the wire format's hot path).
//
// Thread-safety: stateless.
#ifndef GRAVAC_KERNELS_VARINT_CODEC_H_
#define GRAVAC_KERNELS_VARINT_CODEC_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace gravac::kernels::internal {

inline constexpr size_t kMaxVarintBytes = 5;

// Bytes of the unsigned LEB128 encoding of x (branch-free, so the scan below vectorises).
inline uint32_t VarintLen(uint32_t x) {
  return 1 + static_cast<uint32_t>(x >= (1u << 7)) + static_cast<uint32_t>(x >= (1u << 14)) +
         static_cast<uint32_t>(x >= (1u << 21)) + static_cast<uint32_t>(x >= (1u << 28));
}

struct GapScan {
  bool valid;           // strictly ascending and in [0, dense_size)
  size_t stream_bytes;  // bytes of the varint stream (meaningful when valid)
};

// One branch-free pass: validity of the indices and the size of their varint stream.
inline GapScan ScanGaps(absl::Span<const int32_t> idx, int64_t dense_size) {
  const size_t k = idx.size();
  if (k == 0) return {true, 0};
  const int32_t* p = idx.data();
  // Strictly ascending from p[0] >= 0 to p[k - 1] < dense_size puts every index in range.
  uint32_t bad = static_cast<uint32_t>(p[0] < 0 || p[k - 1] >= dense_size);
  size_t total = VarintLen(static_cast<uint32_t>(p[0]));
  // Fixed-size blocks (the loop that GCC's -O2 cost model vectorises), then the tail.
  constexpr size_t kBlock = 16;
  size_t i = 1;
  for (; i + kBlock <= k; i += kBlock) {
    uint32_t block_bad = 0, block_bytes = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      const int32_t cur = p[i + j], prev = p[i + j - 1];
      block_bad |= static_cast<uint32_t>(cur <= prev);
      block_bytes += VarintLen(static_cast<uint32_t>(cur) - static_cast<uint32_t>(prev) - 1);
    }
    bad |= block_bad;
    total += block_bytes;
  }
  for (; i < k; ++i) {
    bad |= static_cast<uint32_t>(p[i] <= p[i - 1]);
    total += VarintLen(static_cast<uint32_t>(p[i]) - static_cast<uint32_t>(p[i - 1]) - 1);
  }
  return {bad == 0, total};
}

// Writes x as a varint with one unaligned 8-byte store (p needs 8 writable bytes); returns the
// end of the varint.
inline uint8_t* PutVarint(uint8_t* p, uint32_t x) {
  const uint64_t v = x;
  uint64_t bytes = (v & 0x7f) | ((v << 1) & 0x7f00) | ((v << 2) & 0x7f0000) |
                   ((v << 3) & 0x7f000000) | ((v << 4) & 0xff00000000ull);
  const size_t len = VarintLen(x);
  bytes |= 0x0000008080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);  // continuation bits
  std::memcpy(p, &bytes, 8);
  return p + len;
}

// Writes the gap stream of `idx` (strictly ascending) at q; q needs ScanGaps(idx).stream_bytes +
// 8 writable bytes. Returns the end of the stream.
inline uint8_t* PutGaps(absl::Span<const int32_t> idx, uint8_t* q) {
  uint32_t next = 0;
  for (int32_t v : idx) {
    const uint32_t gap = static_cast<uint32_t>(v) - next;
    if (gap < 0x80) {
      *q++ = static_cast<uint8_t>(gap);  // the common case: mean gap = theta
    } else {
      q = PutVarint(q, gap);
    }
    next = static_cast<uint32_t>(v) + 1;
  }
  return q;
}

// The error for varint i at stream byte pos: n bytes (> 5: too long), gap, resulting index.
absl::Status GapError(const char* who, int64_t i, size_t pos, size_t n, uint64_t gap, int64_t index,
                      bool last_zero, int64_t dense_size);
// The error for varint i at stream byte pos running past the end of a stream of len bytes.
absl::Status GapPastEndError(const char* who, int64_t i, size_t pos, size_t len);
// The error for bytes left after the count varints, which end at pos.
absl::Status GapTrailingError(const char* who, int64_t count, size_t pos, size_t len);

// Decodes the varint stream of `count` indices, calling f(i, index) for each in order, and
// checks it completely: every varint within the stream, minimal, at most 5 bytes, no gap or
// index over int32, every index < dense_size, and no byte left after the count-th varint
// (InvalidArgument naming `who`, the varint and the stream byte). f is called for indices already
// checked, so on error the calls made so far were for valid indices only.
template <typename F>
absl::Status ForEachGapIndex(absl::Span<const uint8_t> stream, int64_t count, int64_t dense_size,
                             const char* who, F&& f) {
  const uint8_t* s = stream.data();
  const size_t len = stream.size();
  size_t pos = 0;
  int64_t next = 0;  // previous index + 1
  int64_t i = 0;
  while (i < count) {
    uint64_t w = 0;
    if (len - pos >= 8) {
      std::memcpy(&w, s + pos, 8);
      // Eight one-byte varints (gaps < 128, the common case at mean gap <= ~30): indices only
      // grow, so checking the last one against dense_size checks all eight.
      if ((w & 0x8080808080808080ull) == 0 && count - i >= 8) {
        int64_t block[8];
        int64_t x = next;
        for (int j = 0; j < 8; ++j) {
          block[j] = x + static_cast<int64_t>((w >> (8 * j)) & 0x7f);
          x = block[j] + 1;
        }
        if (block[7] < dense_size) {
          for (int j = 0; j < 8; ++j) f(i + j, static_cast<int32_t>(block[j]));
          i += 8;
          pos += 8;
          next = x;
          continue;
        }
        // else: one by one below, to report the first index out of range
      }
    }
    uint64_t gap;
    size_t n;
    int64_t index;
    if (len - pos >= 8) {
      // Branch-free decode of one varint; one well-predicted test for every error.
      const uint64_t stops = ~w & 0x8080808080ull;  // bytes 0..4 without a continuation bit
      n = static_cast<size_t>(std::countr_zero(stops | (uint64_t{1} << 47))) / 8 + 1;  // 6: none
      const uint64_t mask = (uint64_t{1} << (8 * n)) - 1;
      const uint64_t v = w & mask;
      gap = (v & 0x7f) | ((v >> 1) & 0x3f80) | ((v >> 2) & 0x1fc000) | ((v >> 3) & 0xfe00000) |
            ((v >> 4) & 0x7f0000000ull);
      index = next + static_cast<int64_t>(gap);
      const bool last_zero = n > 1 && ((v >> (8 * (n - 1))) & 0xff) == 0;
      if (n > kMaxVarintBytes || last_zero ||
          gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) || index >= dense_size) {
        return GapError(who, i, pos, n, gap, index, last_zero, dense_size);
      }
    } else {
      gap = 0;
      n = 0;
      uint8_t b = 0;
      do {
        if (n == kMaxVarintBytes) break;
        if (pos + n >= len) return GapPastEndError(who, i, pos, len);
        b = s[pos + n];
        gap |= static_cast<uint64_t>(b & 0x7f) << (7 * n);
        ++n;
      } while (b & 0x80);
      if (n == kMaxVarintBytes && (b & 0x80)) ++n;  // a sixth byte follows
      index = next + static_cast<int64_t>(gap);
      const bool last_zero = n > 1 && n <= kMaxVarintBytes && s[pos + n - 1] == 0;
      if (n > kMaxVarintBytes || last_zero ||
          gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) || index >= dense_size) {
        return GapError(who, i, pos, n, gap, index, last_zero, dense_size);
      }
    }
    f(i, static_cast<int32_t>(index));
    next = index + 1;
    pos += n;
    ++i;
  }
  if (pos != len) return GapTrailingError(who, count, pos, len);
  return absl::OkStatus();
}

}  // namespace gravac::kernels::internal

#endif  // GRAVAC_KERNELS_VARINT_CODEC_H_

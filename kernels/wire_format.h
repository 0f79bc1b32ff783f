// The wire format of one Compressed tensor: what a rank sends for a sparse allgather or a dense
// cast, and what Decode checks before anything is added into a gradient.
//
// Byte layout (all fields little-endian; the host must be little-endian):
//
//   offset size field
//        0    4 magic       "GRVC" (0x47 0x52 0x56 0x43)
//        4    2 version     kWireVersion (1)
//        6    1 layout      0 = sparse, explicit int32 indices
//                           1 = sparse, implicit indices (randomk: regenerated from `seed`)
//                           2 = dense (fp16/bf16 cast: all dense_size values, no indices)
//        7    1 value type  0 = fp32, 1 = fp16 (IEEE binary16), 2 = bf16
//        8    8 dense_size  int64, elements of the uncompressed tensor, <= 2^31 - 1
//       16    8 count       int64, values carried (dense: == dense_size; sparse: <= dense_size)
//       24    8 seed        uint64, the randomk seed (layout 1); 0 for the other layouts
//       32    8 checksum    uint64, XXH64(payload, seed = XXH64(bytes [0, 32), seed = 0))
//       40      values      count values, 4 (fp32) or 2 (fp16, bf16) bytes each
//   40+count*w  indices     count int32, strictly ascending, in [0, dense_size) (layout 0 only)
//
// Encode requires values already rounded to the value type (Compressed's contract) and finite;
// it fails with InvalidArgument otherwise, so what Decode returns is bit-identical to what was
// encoded. Decode rejects, naming the field with expected vs got: a short or over-long buffer
// (DataLoss), a bad magic, version, layout or value type, count > dense_size, a payload size that
// does not match the header (DataLoss), a checksum mismatch (DataLoss), an index out of range or
// not strictly ascending, a non-finite value, and a nonzero seed outside layout 1
// (InvalidArgument). Implicit indices are regenerated with cpu::RandomKIndices (one O(dense_size)
// arithmetic pass on the caller's thread); Encode trusts that an implicit-index Compressed's
// indices derive from its seed (re-deriving them would cost that pass on the sender too).
//
// Thread-safety: stateless.
#ifndef GRAVAC_KERNELS_WIRE_FORMAT_H_
#define GRAVAC_KERNELS_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"

namespace gravac::kernels {

inline constexpr uint32_t kWireMagic = 0x43565247;  // "GRVC" as little-endian bytes
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kWireHeaderSize = 40;

enum class WireLayout : uint8_t { kSparseExplicit = 0, kSparseImplicit = 1, kDense = 2 };

// Exact number of bytes Encode(c) produces.
size_t EncodedSize(const Compressed& c);

// Replaces *out with the encoding of c.
absl::Status Encode(const Compressed& c, std::vector<uint8_t>* out);

// Parses and checks `in`; on success *out holds the tensor (indices filled in for every sparse
// layout). On error *out is unspecified.
absl::Status Decode(absl::Span<const uint8_t> in, Compressed* out);

namespace internal {
// XXH64 (xxHash, 64-bit) of `data` with `seed`.
uint64_t XxHash64(absl::Span<const uint8_t> data, uint64_t seed);
}  // namespace internal

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_WIRE_FORMAT_H_

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
//                           3 = sparse, delta-coded indices (varint gaps)
//        7    1 value type  0 = fp32, 1 = fp16 (IEEE binary16), 2 = bf16
//        8    8 dense_size  int64, elements of the uncompressed tensor, <= 2^31 - 1
//       16    8 count       int64, values carried (dense: == dense_size; sparse: <= dense_size)
//       24    8 seed        uint64, the randomk seed (layout 1); 0 for the other layouts
//       32    8 checksum    uint64, XXH64(payload, seed = XXH64(bytes [0, 32), seed = 0))
//       40      values      count values, 4 (fp32) or 2 (fp16, bf16) bytes each
//   then, layout 0:
//   V = 40+count*w          indices       count int32, strictly ascending, in [0, dense_size)
//   then, layout 3:
//   V = 40+count*w      8   stream_bytes  uint64 L, byte length of the varint stream
//   V+8                 L   gaps          count unsigned LEB128 varints (7 bits a byte, low
//                                         group first, high bit = more bytes follow), each
//                                         minimal and at most 5 bytes: idx[0], then
//                                         idx[i] - idx[i-1] - 1 for i >= 1
//   The buffer ends exactly at V+8+L. The payload (checksummed) is everything after byte 40.
//   The varint codec is kernels/varint_codec.h.
//
// Encode picks the layout: dense tensors 2, implicit-index tensors 1, explicit-index tensors 3
// when that is strictly smaller than layout 0 (8 + varint bytes < 4 * count), else 0. That is
// practically always: every varint under 4 bytes (gaps < 2^21) with count >= 9 suffices, and
// one-byte varints (gaps < 128, mean gap = theta) with count >= 3. Decode accepts all four.
// EncodedSize is exact; for explicit indices it is one branch-free pass over the indices.
//
// Encode requires values already rounded to the value type (Compressed's contract) and finite;
// it fails with InvalidArgument otherwise, so what Decode returns is bit-identical to what was
// encoded. Decode rejects, naming the field with expected vs got: a short or over-long buffer
// (DataLoss), a bad magic, version, layout or value type, count > dense_size, a payload size that
// does not match the header or, for layout 3, stream_bytes (DataLoss), a checksum mismatch
// (DataLoss), an index out of range or not strictly ascending, a non-finite value, and a nonzero
// seed outside layout 1 (InvalidArgument). For layout 3 it also rejects (InvalidArgument) a varint
// that runs past the stream, is longer than 5 bytes or not minimal, a gap or index that
// overflows int32, an index >= dense_size, and stream bytes left after the count-th varint.
// Implicit indices are regenerated with cpu::RandomKIndices (one O(dense_size)
// arithmetic pass on the caller's thread); Encode trusts that an implicit-index Compressed's
// indices derive from its seed (re-deriving them would cost that pass on the sender too).
//
// DecodeAdd(in, scale, out) is Decode followed by cpu::DecompressAdd(decoded, scale, out),
// fused: the same checks (plus out.size() == dense_size), all made before `out` is written (on
// error `out` is unchanged), and the same fp32 operations in the same order, so the result is
// bit-identical. Layouts 0, 2 and 3 are read straight from `in` (a validating pass over the
// message, then the add pass); layout 1 decodes into a local Compressed first.
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

enum class WireLayout : uint8_t {
  kSparseExplicit = 0,
  kSparseImplicit = 1,
  kDense = 2,
  kSparseDelta = 3,
};

// Exact number of bytes Encode(c) produces.
size_t EncodedSize(const Compressed& c);
size_t EncodedSize(const CompressedView& c);

// The most bytes Encode can produce for a sparse tensor of `count` values out of `dense_size`
// (0 <= count <= dense_size), whatever its indices: for planning before anything is compressed.
// Implicit indices: header + values. Explicit ones: header + values + the smaller of int32
// indices and the varint bound 8 + ceil(count * (1 + log2(dense_size / count) / 7)), which holds
// because a gap g takes at most 1 + log2(g + 1) / 7 bytes, the gaps sum to at most
// dense_size - count, and log is concave (Jensen).
size_t SparseEncodedSizeBound(int64_t dense_size, int64_t count, ValueType type,
                              bool implicit_indices);

// Replaces *out with the encoding of c.
absl::Status Encode(const Compressed& c, std::vector<uint8_t>* out);
absl::Status Encode(const CompressedView& c, std::vector<uint8_t>* out);
// Appends the encoding of c to *out (the engine's exchange payload: no copy out of a buffer of
// its own); on error *out is as it was.
absl::Status EncodeAppend(const CompressedView& c, std::vector<uint8_t>* out);

// Parses and checks `in`; on success *out holds the tensor (indices filled in for every sparse
// layout). On error *out is unspecified.
absl::Status Decode(absl::Span<const uint8_t> in, Compressed* out);

// out[i] += scale * (decoded tensor)[i], bit-identical to Decode + cpu::DecompressAdd. `out` must
// have dense_size elements (InvalidArgument otherwise); on any error `out` is unchanged.
absl::Status DecodeAdd(absl::Span<const uint8_t> in, float scale, absl::Span<float> out);

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_WIRE_FORMAT_H_

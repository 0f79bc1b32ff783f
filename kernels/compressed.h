// Compressed: the in-memory form of one compressed, flattened fp32 tensor, as produced by a
// Compressor and consumed by decompression, error feedback and the wire format (wire_format.h).
//
// Two layouts:
//  - sparse (dense == false): `count()` (index, value) pairs. Indices are int32, strictly
//    ascending and in [0, dense_size). When `implicit_indices` is set (randomk) the indices are
//    still filled in memory but are not sent on the wire: the receiver regenerates them from
//    `seed`, so only values travel.
//  - dense cast (dense == true): all dense_size values, carried at `value_type` precision.
// Values are held as fp32 in memory; `value_type` is the precision they travel at, and they are
// already rounded to it (so decompress(compress(x)) equals what the receiver sees).
//
// Thread-safety: a plain value type.
#ifndef GRAVAC_KERNELS_COMPRESSED_H_
#define GRAVAC_KERNELS_COMPRESSED_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace gravac::kernels {

enum class ValueType : uint8_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

struct Compressed {
  int64_t dense_size = 0;
  bool dense = false;             // true for fp16/bf16 casts: values has dense_size entries
  ValueType value_type = ValueType::kFloat32;
  bool implicit_indices = false;  // randomk: indices derive from `seed` and are not sent
  uint64_t seed = 0;
  std::vector<int32_t> indices;   // sparse only; ascending
  std::vector<float> values;

  int64_t count() const { return static_cast<int64_t>(values.size()); }
};

// A Compressed's fields over memory it does not own: what the wire encoding (wire_format.h)
// reads, so a message that lies elsewhere in host memory (a compression backend's message
// buffers, kernels/backend_step.h) is encoded without a copy into a Compressed first. Valid while
// that memory is.
struct CompressedView {
  int64_t dense_size = 0;
  bool dense = false;
  ValueType value_type = ValueType::kFloat32;
  bool implicit_indices = false;
  uint64_t seed = 0;
  absl::Span<const int32_t> indices;
  absl::Span<const float> values;

  int64_t count() const { return static_cast<int64_t>(values.size()); }
};

inline CompressedView ViewOf(const Compressed& c) {
  return CompressedView{.dense_size = c.dense_size,
                        .dense = c.dense,
                        .value_type = c.value_type,
                        .implicit_indices = c.implicit_indices,
                        .seed = c.seed,
                        .indices = c.indices,
                        .values = c.values};
}

// Number of elements kept from a tensor of n elements at compression factor theta >= 1:
// k = max(1, floor(n / theta)) for n > 0, and 0 for n == 0 (GRAVAC.md "Conventions").
inline int64_t KeepCount(int64_t n, double theta) {
  if (n <= 0) return 0;
  if (!(theta > 1.0)) return n;
  int64_t k = static_cast<int64_t>(static_cast<double>(n) / theta);
  return k < 1 ? 1 : (k > n ? n : k);
}

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_COMPRESSED_H_

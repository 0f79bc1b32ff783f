#include "kernels/cpu/scatter_add.h"

#include "absl/strings/str_format.h"

namespace gravac::kernels::cpu {

absl::Status ScatterAdd(absl::Span<const int32_t> indices, absl::Span<const float> values,
                        float scale, absl::Span<float> out) {
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ScatterAdd: %d indices but %d values", indices.size(), values.size()));
  }
  const int64_t n = static_cast<int64_t>(out.size());
  // Branch-free range test over all indices first (vectorises), so `out` is untouched on error.
  uint32_t any_bad = 0;
  for (int32_t idx : indices) any_bad |= static_cast<uint32_t>(idx < 0 || idx >= n);
  if (any_bad != 0) {
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] < 0 || indices[i] >= n) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "ScatterAdd: index %d at position %d is outside [0, %d)", indices[i], i, n));
      }
    }
  }
  float* o = out.data();
  for (size_t i = 0; i < indices.size(); ++i) o[indices[i]] += scale * values[i];
  return absl::OkStatus();
}

absl::Status DecompressAdd(const Compressed& c, float scale, absl::Span<float> out) {
  if (c.dense_size != static_cast<int64_t>(out.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DecompressAdd: compressed tensor has dense_size %d but the output has %d elements",
        c.dense_size, out.size()));
  }
  if (!c.dense) return ScatterAdd(c.indices, c.values, scale, out);
  if (c.count() != c.dense_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DecompressAdd: dense compressed tensor has %d values, expected dense_size %d", c.count(),
        c.dense_size));
  }
  float* o = out.data();
  const float* v = c.values.data();
  for (int64_t i = 0; i < c.dense_size; ++i) o[i] += scale * v[i];
  return absl::OkStatus();
}

void DivideAll(absl::Span<float> out, float divisor) {
  float* o = out.data();
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) o[i] = o[i] / divisor;
}

}  // namespace gravac::kernels::cpu

// Scatter-add and decompression into a dense fp32 buffer (the CPU reference; the CUDA twin in
// kernels/cuda/ mirrors ScatterAdd).
//
//   ScatterAdd(indices, values, scale, out): out[indices[i]] += scale * values[i] for every i.
//   DecompressAdd(c, scale, out): the same for a Compressed, sparse or dense (out[i] += scale *
//   values[i]); out must have c.dense_size elements.
//
//   DivideAll(out, divisor): out[i] = out[i] / divisor for every i (the fp32 division of the
//   average, vectorised: the same bits as an element-by-element loop).
//
// ScatterAdd and DecompressAdd validate everything (sizes, every index in [0, out.size())) before writing, so on error
// `out` is unchanged. Duplicate indices accumulate in order. The products are computed in fp32
// (scale * value, then added), exactly like the CUDA twin, so the two agree bit for bit when the
// indices are distinct.
//
// Thread-safety: stateless. Concurrent calls are safe when their `out` spans do not overlap.
#ifndef GRAVAC_KERNELS_CPU_SCATTER_ADD_H_
#define GRAVAC_KERNELS_CPU_SCATTER_ADD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"

namespace gravac::kernels::cpu {

absl::Status ScatterAdd(absl::Span<const int32_t> indices, absl::Span<const float> values,
                        float scale, absl::Span<float> out);

absl::Status DecompressAdd(const Compressed& c, float scale, absl::Span<float> out);

void DivideAll(absl::Span<float> out, float divisor);

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_SCATTER_ADD_H_

// The output side of the sparse selection compressors (topk, dgc, redsync): argument checks,
// the sparse result's header and rounding, and multi-level selection from an already sparse
// output (CompressFrom).
//
// Thread-safety: stateless.
#ifndef GRAVAC_KERNELS_CPU_SELECTION_OUTPUT_H_
#define GRAVAC_KERNELS_CPU_SELECTION_OUTPUT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"

namespace gravac::kernels::cpu {

// Checks shared by every sparse compressor's Compress: n fits int32 indices, theta >= 1 (NaN
// rejected), each failure an InvalidArgument naming the tensor.
absl::Status CheckCompressArgs(int64_t n, double theta, std::string_view tensor_name);

// Sets *out's header for a sparse result of an n-element tensor at `type` (buffers kept).
void PrepareSparseOutput(int64_t n, ValueType type, Compressed* out);
// Rounds out->values to out->value_type (InvalidArgument naming the tensor and index if a value
// overflows it).
absl::Status FinishSparseOutput(std::string_view tensor_name, Compressed* out);

// Exact top-k among first's entries (ties: lower index), indices ascending, into *out (buffers
// reused; dense_size and value_type copied; implicit_indices false). k is clamped to
// first.count(). `first` must be sparse with as many indices as values, else InvalidArgument.
absl::Status SelectTopKFromSparse(const Compressed& first, int64_t k, Compressed* out);
// The same over a view (a compression backend's message in host memory, read where it lies).
absl::Status SelectTopKFromSparse(const CompressedView& first, int64_t k, Compressed* out);

// CompressFrom for the sparse selection compressors: exact top-KeepCount(first.dense_size, θ)
// of `first`, after checking θ.
absl::Status SelectFrom(const Compressed& first, double theta, const CompressContext& ctx,
                        Compressed* out);
absl::Status SelectFrom(const CompressedView& first, double theta, const CompressContext& ctx,
                        Compressed* out);

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_SELECTION_OUTPUT_H_

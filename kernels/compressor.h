// Compressor: turns one flattened fp32 tensor into a Compressed at a compression factor θ.
//
// Contract, for every implementation (rules in GRAVAC.md, "Compressors"):
//  - Compress(input, theta, ctx, out) reads input (n elements) and fills *out, reusing its
//    buffers. theta >= 1; the sparse compressors aim at k = KeepCount(n, theta) elements (topk
//    and randomk exactly k, dgc and redsync about k); dense casts ignore theta.
//  - Non-finite input (NaN, ±Inf) is rejected with InvalidArgument naming the tensor
//    (ctx.tensor_name) and the first bad index; *out is then unspecified.
//  - n must fit int32 indices (n <= 2^31 - 1), else InvalidArgument.
//  - Deterministic: the same input, theta and ctx give the same output on every rank and run.
//    Among equal magnitudes the lower index wins (so exact top-k equals a stable sort oracle).
//  - Output indices are strictly ascending.
//  - CompressFrom(first, theta, ctx, out) is the second level of multi-level compression: it
//    selects from an earlier, less compressed output `first` (of the same tensor) instead of the
//    full tensor. For topk this equals Compress on the full tensor.
//  - Compress may block while it uses the ThreadPool given at construction; it is not safe to call
//    one Compressor from two threads at once (it keeps scratch buffers).
#ifndef GRAVAC_KERNELS_COMPRESSOR_H_
#define GRAVAC_KERNELS_COMPRESSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"
#include "kernels/compressed.h"

namespace gravac::kernels {

// What a compressor may use besides the data: randomk derives its shared seed from these.
struct CompressContext {
  std::string_view tensor_name;
  int64_t step = 0;
  uint64_t job_seed = 0;
};

class Compressor {
 public:
  virtual ~Compressor() = default;

  virtual std::string_view name() const = 0;
  // True for dense casts (fp16, bf16): every element travels, θ is fixed.
  virtual bool is_dense() const { return false; }

  virtual absl::Status Compress(absl::Span<const float> input, double theta,
                                const CompressContext& ctx, Compressed* out) = 0;

  virtual absl::Status CompressFrom(const Compressed& first, double theta,
                                    const CompressContext& ctx, Compressed* out) = 0;

  // True when CompressFrom(Compress(p, θ1), θ2) equals Compress(p, θ2) for every θ2 >= θ1 (topk,
  // randomk), so a caller may compute the second level first and the first one later.
  virtual bool SecondLevelEqualsDirect() const { return false; }

  // The most values a sparse Compress or CompressFrom at θ can keep of n (for planning the bytes
  // of a send before compressing): KeepCount(n, θ) unless the compressor says otherwise.
  virtual int64_t MaxCount(int64_t n, double theta) const { return KeepCount(n, theta); }
};

// Options shared by all compressors.
struct CompressorOptions {
  ValueType value_type = ValueType::kFloat32;  // precision of sparse values on the wire
  ThreadPool* pool = nullptr;                  // not owned; nullptr runs on the caller only
};

// Builds a compressor by name: "topk", "randomk", "dgc", "redsync", "fp16", "bf16".
// Unknown names fail with InvalidArgument listing the known ones.
absl::StatusOr<std::unique_ptr<Compressor>> MakeCompressor(std::string_view name,
                                                           const CompressorOptions& options);

// Names MakeCompressor accepts, in a fixed order.
const std::vector<std::string>& CompressorNames();

}  // namespace gravac::kernels

#endif  // GRAVAC_KERNELS_COMPRESSOR_H_

// Benchmark data and output checks for the compressor benchmark (compressor_bench.cc).
//
//  - GenerateData fills a tensor with normal or Laplace samples. The stream is cut into fixed
//    blocks, each seeded from (seed, block), so the data depends on the seed alone and not on the
//    number of lanes.
//  - ParallelCopy is the benchmark's memcpy unit: one std::memcpy per lane of the pool, i.e. the
//    same lanes a compressor uses.
//  - ValidateOutput checks a compressor's output against its input and the rules of its name
//    (GRAVAC.md, "Compressors"): layout, exact values, counts, and the magnitude property of the
//    selection compressors. OutputHash fingerprints an output so repetitions can be compared bit
//    for bit (compressors are deterministic).
//
// Thread-safety: stateless functions; the ones taking a ThreadPool block while they use it.
#ifndef GRAVAC_BENCH_BENCH_DATA_H_
#define GRAVAC_BENCH_BENCH_DATA_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"
#include "kernels/compressed.h"

namespace gravac::bench {

enum class Distribution { kNormal, kLaplace };

// Parses "normal" or "laplace".
absl::StatusOr<Distribution> ParseDistribution(std::string_view text);

// n samples of N(0, 1) or Laplace(0, 1), deterministic in `seed`. `pool` may be nullptr.
std::vector<float> GenerateData(int64_t n, Distribution distribution, uint64_t seed,
                                ThreadPool* pool);

// Copies `bytes` from src to dst, split over the lanes of `pool` (nullptr: the caller alone).
void ParallelCopy(void* dst, const void* src, int64_t bytes, ThreadPool* pool);

// Median of `values` (the mean of the two middle ones for an even count); 0 when empty.
double Median(std::vector<double> values);

// What a correct output of one compressor looks like.
struct OutputRules {
  bool dense = false;          // fp16 / bf16: every element, cast
  double cast_rel_tol = 0.0;   // dense: allowed |v - x| / |x| (one unit in the last place)
  double cast_abs_tol = 0.0;   // dense: allowed |v - x| near zero (subnormals)
  bool exact_count = false;    // topk, randomk: exactly k elements
  bool magnitude_set = false;  // topk, dgc, redsync: no dropped |x| exceeds the smallest kept
};

// The rules for a compressor name of kernels::CompressorNames(); NotFound for another name.
absl::StatusOr<OutputRules> RulesFor(std::string_view compressor);

// Checks `out` as the fp32-valued output of a compressor obeying `rules` on `input`, asked for
// k elements. Returns InternalError naming the first violation. `pool` may be nullptr.
absl::Status ValidateOutput(absl::Span<const float> input, const kernels::Compressed& out,
                            const OutputRules& rules, int64_t k, ThreadPool* pool);

// A 64-bit fingerprint of the indices and the value bits of `out`.
uint64_t OutputHash(const kernels::Compressed& out);

}  // namespace gravac::bench

#endif  // GRAVAC_BENCH_BENCH_DATA_H_

// Selection machinery shared by the CPU sparse compressors (topk, dgc, redsync; their skeleton is
// sparse_selection.h): exact top-k by magnitude, threshold filters and counts. Its pieces: keys
// and the gathered CandidateSet (candidate_set.h), the gather and count block kernels
// (block_gather.h), the histogram k-th largest search (kth_largest.h), the counter of the
// threshold searches (threshold_counter.h), and the output side (selection_output.h).
//
// Order: elements are compared by |x| through MagnitudeKey (candidate_set.h). Among equal
// magnitudes the lower index wins, so exact top-k equals a stable sort oracle (sort
// by |x| descending, index ascending, keep the first k, sort them by index). Outputs are index
// ascending, values signed and unrounded (the compressors round them to their value type).
//
// How the exact top-k is found without a sort (Selector::TopK):
//  1. A deterministic stratified sample (one run of kTopKSampleRun consecutive elements, two
//     cache lines, at a hashed aligned offset in each stratum of TopKSampleStratum(n): about
//     1/128 of a large tensor, all of a tensor of less than 128Ki elements) estimates a cut key c
//     just below the k-th largest magnitude (sample rank e·1.02 + 5σ + 2 for e expected, σ² the
//     larger of e and the variance that neighbouring runs show: data correlated within a row of
//     a weight gradient widens the margin, independent data keeps σ = √e).
//  2. One parallel pass over the input gathers every element with key > c and up to k elements
//     with key == c per lane (ThreadPool lanes hold contiguous, index-ordered chunks), counts
//     the rest, and fuses the finiteness check: a non-finite key lies above any finite c.
//  3. The k-th largest key T among the gathered ones (a 16-bit histogram and an nth_element on
//     the boundary bucket) and one index-ordered walk emit key > T, then the lowest-index ties.
//  When the sample misleads (fewer than k at or above c, or more than the memory budget above
//  it) an exact fallback finds T with two 16-/15-bit histogram passes and gathers again at T.
//  So a normal input is read once (plus the sample); any input at most four times.
//
// Thread-safety: the free functions are safe from any thread (a ThreadPool serialises its own
// calls). A Selector keeps scratch buffers: one caller at a time.
#ifndef GRAVAC_KERNELS_CPU_SELECT_H_
#define GRAVAC_KERNELS_CPU_SELECT_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"
#include "kernels/cpu/candidate_set.h"

namespace gravac::kernels::cpu {

// Exact top-k of `input` by |x| (ties: lower index), indices ascending, values signed. k < 0 is
// InvalidArgument; k > n keeps all n. Non-finite input is InvalidArgument naming the first bad
// index. `pool` may be nullptr (runs on the caller). This is the CPU twin of the CUDA top-k.
absl::Status TopK(absl::Span<const float> input, int64_t k, ThreadPool* pool,
                  std::vector<int32_t>* indices, std::vector<float>* values);

// Every element with |x| >= threshold, indices ascending. threshold must be finite (a negative
// one keeps everything); non-finite input is InvalidArgument naming the first bad index.
// The CPU twin of the CUDA threshold filter.
absl::Status ThresholdFilter(absl::Span<const float> input, float threshold, ThreadPool* pool,
                             std::vector<int32_t>* indices, std::vector<float>* values);

// Number of elements with |x| >= threshold (a negative threshold counts all, NaN counts none).
// Input is assumed finite: ±Inf and NaN elements count as larger than any threshold.
int64_t CountAtLeast(absl::Span<const float> input, float threshold, ThreadPool* pool);

// What Selector calls cost since ResetStats(): full reads of the input (the sample not counted)
// and whether an exact fallback ran (top-k: the sample misled it; dgc, redsync: the threshold
// search did not reach its band). For tests and benchmarks.
struct SelectStats {
  int full_passes = 0;
  bool fallback = false;
};

// The reusable engine behind the free functions and the compressors (scratch kept between
// calls). Every method that reads the input runs on `pool` (may be nullptr).
class Selector {
 public:
  static constexpr int64_t kSampleChunk = 64;

  explicit Selector(ThreadPool* pool) : pool_(pool) {}

  // Exact top-k (see the file comment); errors name `tensor_name`.
  absl::Status TopK(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                    std::vector<int32_t>* indices, std::vector<float>* values);
  // TopK into caller memory: the min(k, n) pairs to indices[0, min(k, n)) and values[0, min(k,
  // n)) (a compression backend's message buffers: no copy out of the Selector's own).
  absl::Status TopK(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                    int32_t* indices, float* values);
  // Every element with key >= cut, ascending; errors name `tensor_name`.
  absl::Status FilterAtLeast(absl::Span<const float> input, uint32_t cut,
                             std::string_view tensor_name, std::vector<int32_t>* indices,
                             std::vector<float>* values);

  static constexpr int64_t kTopKSampleRun = 32;  // elements per run of the top-k sample

  // Stride of a chunked sample of n elements (kSampleChunk elements at each multiple; redsync).
  static int64_t TopKSampleStride(int64_t n);
  // The top-k sample (TopK): stratum j is [j*S, min(n, (j+1)*S)) for S = TopKSampleStratum(n),
  // and its run is the up to kTopKSampleRun elements from TopKSampleRunStart(n, j).
  static int64_t TopKSampleStratum(int64_t n);
  static int64_t TopKSampleRunStart(int64_t n, int64_t j);
  // Keys of the top-k sample, run after run in index order, into *keys. Returns false if a
  // sampled element is non-finite.
  bool SampleTopK(absl::Span<const float> input, std::vector<uint32_t>* keys);
  // Keys of the elements at [j*stride, j*stride + chunk) for every j, in order, into *keys.
  // Returns false if a sampled element is non-finite.
  bool Sample(absl::Span<const float> input, int64_t stride, int64_t chunk,
              std::vector<uint32_t>* keys);
  // A cut key c such that, with high probability, a little more than `rank` elements of the
  // n-element tensor have key >= c, from sample keys drawn from it (exact if the sample is all).
  // run > 0: the sample is runs of `run` keys from consecutive strata (the last may be shorter),
  // and the margin widens to the variance the differences of neighbouring runs show.
  uint32_t EstimateCut(absl::Span<const uint32_t> sample, int64_t n, int64_t rank, int64_t run = 0);
  // The r-th largest (1-based, 1 <= r <= keys.size()) key; reorders nothing in `keys`.
  uint32_t KthLargestKey(absl::Span<const uint32_t> keys, int64_t r);

  // One parallel pass gathering the elements with key >= cut into *set (see CandidateSet).
  // With sum_abs, also the sum of |x| (in an order independent of the pool size).
  void Gather(absl::Span<const float> input, uint32_t cut, int64_t budget, int64_t tie_cap,
              bool sum_abs, CandidateSet* set);
  // Exact top-k of the tensor from a set that holds it: set.count() >= k, set.above_complete,
  // and each lane stored min(its ties, k) ties at least.
  void EmitTopK(const CandidateSet& set, int64_t k, std::vector<int32_t>* indices,
                std::vector<float>* values);
  // EmitTopK into caller memory of k pairs.
  void EmitTopK(const CandidateSet& set, int64_t k, int32_t* indices, float* values);
  // Every stored element with key >= t, ascending (all of the tensor's when set.Holds(t)).
  // `count`, if >= 0, is their number (as a ThresholdCounter found it), saving a scan.
  void EmitAtLeast(const CandidateSet& set, uint32_t t, std::vector<int32_t>* indices,
                   std::vector<float>* values, int64_t count = -1);
  // Full pass: number of elements with key >= t.
  int64_t CountAtLeastKey(absl::Span<const float> input, uint32_t t);

  const SelectStats& stats() const { return stats_; }
  void ResetStats() { stats_ = SelectStats(); }
  void MarkFallback() { stats_.fallback = true; }
  ThreadPool* pool() const { return pool_; }

 private:
  // Exact k-th largest key of a finite input: two histogram passes.
  uint32_t KthLargestKeyFull(absl::Span<const float> input, int64_t k);
  void ParallelFor(int64_t n, int64_t grain, const ThreadPool::Body& body);
  int lanes() const { return pool_ == nullptr ? 1 : pool_->size(); }

  ThreadPool* pool_;
  SelectStats stats_;
  CandidateSet set_;
  std::vector<uint32_t> sample_;
  std::vector<uint32_t> scratch_;
  std::vector<uint32_t> histogram_;
  std::vector<double> block_sums_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_SELECT_H_

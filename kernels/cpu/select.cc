#include "kernels/cpu/select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "kernels/cpu/block_gather.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/kth_largest.h"

namespace gravac::kernels::cpu {
namespace {

using internal::CountAtLeastIn;
using internal::kHighBits;
using internal::kLowBits;
using internal::kSuperBlock;
using internal::KthLargest;
using internal::KthLargestFromHistogram;

constexpr int64_t kGrainSuperBlocks = 16;
constexpr int64_t kGrain = 1 << 16;  // elements per parallel chunk at least
constexpr std::string_view kUnnamed = "(unnamed)";

}  // namespace

void Selector::ParallelFor(int64_t n, int64_t grain, const ThreadPool::Body& body) {
  if (pool_ == nullptr) {
    if (n > 0) body(0, 0, n);
    return;
  }
  pool_->ParallelFor(n, grain, body);
}

int64_t Selector::TopKSampleStride(int64_t n) {
  return kSampleChunk * std::clamp<int64_t>(n / 65536, 1, 128);
}

int64_t Selector::TopKSampleStratum(int64_t n) {
  return TopKSampleStride(n) / kSampleChunk * kTopKSampleRun;
}

int64_t Selector::TopKSampleRunStart(int64_t n, int64_t j) {
  const int64_t begin = j * TopKSampleStratum(n);
  const int64_t slots =
      (std::min(n - begin, TopKSampleStratum(n)) + kTopKSampleRun - 1) / kTopKSampleRun;
  // SplitMix64 of j: offsets that no row length or column pattern of a tensor aliases with.
  uint64_t z = static_cast<uint64_t>(j) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return begin +
         static_cast<int64_t>(((z >> 32) * static_cast<uint64_t>(slots)) >> 32) * kTopKSampleRun;
}

bool Selector::SampleTopK(absl::Span<const float> input, std::vector<uint32_t>* keys) {
  const int64_t n = static_cast<int64_t>(input.size());
  const int64_t stratum = TopKSampleStratum(n);
  const int64_t strata = (n + stratum - 1) / stratum;
  keys->resize(strata * kTopKSampleRun);
  uint32_t any = 0;
  int64_t pos = 0;
  constexpr int64_t kAhead = 16;  // runs prefetched ahead: their lines are not in a stride
  auto prefetch = [&](int64_t j) {
    const float* p = input.data() + TopKSampleRunStart(n, j);
    for (int64_t i = 0; i < kTopKSampleRun; i += 16) __builtin_prefetch(p + i);
  };
  for (int64_t j = 0; j < std::min(strata, kAhead); ++j) prefetch(j);
  for (int64_t j = 0; j < strata; ++j) {
    if (j + kAhead < strata) prefetch(j + kAhead);
    const int64_t start = TopKSampleRunStart(n, j);
    const int64_t len = std::min(kTopKSampleRun, n - start);
    const float* src = input.data() + start;
    uint32_t* dst = keys->data() + pos;
    for (int64_t i = 0; i < len; ++i) {
      dst[i] = MagnitudeKey(src[i]);
      any |= dst[i] >= kNonFiniteKey;
    }
    pos += len;
  }
  keys->resize(pos);
  return any == 0;
}

bool Selector::Sample(absl::Span<const float> input, int64_t stride, int64_t chunk,
                      std::vector<uint32_t>* keys) {
  const int64_t n = static_cast<int64_t>(input.size());
  stride = std::max(stride, chunk);
  const int64_t chunks = (n + stride - 1) / stride;
  keys->resize(chunks == 0 ? 0 : (chunks - 1) * chunk + std::min(chunk, n - (chunks - 1) * stride));
  // Serial: the sample is small, and waking the pool costs more than reading it.
  uint32_t any = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t len = std::min(chunk, n - c * stride);
    const float* src = input.data() + c * stride;
    uint32_t* dst = keys->data() + c * chunk;
    for (int64_t j = 0; j < len; ++j) {
      dst[j] = MagnitudeKey(src[j]);
      any |= dst[j] >= kNonFiniteKey;
    }
  }
  return any == 0;
}

uint32_t Selector::KthLargestKey(absl::Span<const uint32_t> keys, int64_t r) {
  auto for_each = [keys](auto&& fn) {
    for (uint32_t key : keys) fn(key);
  };
  return KthLargest(for_each, r, &histogram_, &scratch_).key;
}

uint32_t Selector::EstimateCut(absl::Span<const uint32_t> sample, int64_t n, int64_t rank,
                               int64_t run) {
  const int64_t s = static_cast<int64_t>(sample.size());
  if (s == 0 || rank <= 0) return 0;
  if (s == n) return KthLargestKey(sample, std::min(rank, s));
  const double e = static_cast<double>(rank) * static_cast<double>(s) / static_cast<double>(n);
  auto for_each = [sample](auto&& fn) {
    for (uint32_t key : sample) fn(key);
  };
  internal::HighHistogram(for_each, &histogram_);
  double variance = e;  // independent keys: the sample count at or above a cut is ~Poisson
  if (run > 0 && s >= 2 * run) {
    // Each stratum holds one run, so the count's variance is the sum of the strata's; a pair of
    // neighbouring strata estimates theirs by the squared difference of their runs' counts,
    // here at the floor of the histogram bucket of the expected rank (close enough for a margin).
    int64_t above = 0;
    const uint32_t c =
        internal::HighBucket(histogram_, std::clamp<int64_t>(std::llround(e), 1, s), &above)
        << kLowBits;
    double paired = 0.0;
    const int64_t pairs = s / (2 * run);
    for (int64_t p = 0; p < pairs; ++p) {
      const uint32_t* a = sample.data() + 2 * p * run;
      int32_t d = 0;
      for (int64_t i = 0; i < run; ++i) d += int32_t{a[i] >= c} - int32_t{a[run + i] >= c};
      paired += static_cast<double>(d) * d;
    }
    variance =
        std::max(variance, paired * static_cast<double>(s) / static_cast<double>(2 * pairs * run));
  }
  const double r = std::ceil(e * 1.02 + 5.0 * std::sqrt(variance) + 2.0);
  return KthLargestFromHistogram(for_each, std::min<int64_t>(s, static_cast<int64_t>(r)),
                                 histogram_, &scratch_)
      .key;
}

void Selector::Gather(absl::Span<const float> input, uint32_t cut, int64_t budget, int64_t tie_cap,
                      bool sum_abs, CandidateSet* set) {
  const int64_t n = static_cast<int64_t>(input.size());
  const int64_t superblocks = (n + kSuperBlock - 1) / kSuperBlock;
  set->cut = cut;
  set->lanes.resize(lanes());
  for (CandidateSet::Lane& lane : set->lanes) {
    std::vector<int32_t> indices = std::move(lane.indices);
    std::vector<float> values = std::move(lane.values);
    indices.clear();
    values.clear();
    lane = CandidateSet::Lane();
    lane.indices = std::move(indices);
    lane.values = std::move(values);
  }
  if (sum_abs) block_sums_.assign(superblocks, 0.0);
  ParallelFor(superblocks, kGrainSuperBlocks, [&](int lane_id, int64_t begin, int64_t end) {
    internal::GatherSuperBlocks(input.data(), n, begin, end, cut, budget, tie_cap,
                                &set->lanes[lane_id], sum_abs ? block_sums_.data() : nullptr);
  });
  ++stats_.full_passes;
  set->above = set->ties = set->stored = 0;
  set->above_complete = set->ties_complete = true;
  set->first_bad = -1;
  set->max_key = 0;
  for (const CandidateSet::Lane& lane : set->lanes) {
    set->above += lane.above;
    set->ties += lane.ties;
    set->stored += static_cast<int64_t>(lane.values.size());
    set->above_complete &= lane.above_stored == lane.above;
    set->ties_complete &= lane.ties_stored == lane.ties;
    if (set->first_bad < 0) set->first_bad = lane.first_bad;
    set->max_key = std::max(set->max_key, lane.max_key);
  }
  set->abs_sum = 0.0;
  if (sum_abs) {
    for (double s : block_sums_) set->abs_sum += s;
  }
}

void Selector::EmitTopK(const CandidateSet& set, int64_t k, std::vector<int32_t>* indices,
                        std::vector<float>* values) {
  indices->resize(k);
  values->resize(k);
  EmitTopK(set, k, indices->data(), values->data());
}

void Selector::EmitTopK(const CandidateSet& set, int64_t k, int32_t* indices, float* values) {
  if (k == 0) return;
  auto for_each = [&set](auto&& fn) {
    for (const CandidateSet::Lane& lane : set.lanes) {
      const size_t m = lane.values.size();
      for (size_t i = 0; i < m; ++i) fn(lane.indices[i], lane.values[i]);
    }
  };
  internal::EmitTopKOf(for_each, k, indices, values, &histogram_, &scratch_);
}

void Selector::EmitAtLeast(const CandidateSet& set, uint32_t t, std::vector<int32_t>* indices,
                           std::vector<float>* values, int64_t count) {
  if (count < 0) {
    count = 0;
    for (const CandidateSet::Lane& lane : set.lanes) {
      count += CountAtLeastIn(lane.values.data(), static_cast<int64_t>(lane.values.size()), t);
    }
  }
  indices->resize(count + 1);  // branch-free writes: one slot past the end for the rejects
  values->resize(count + 1);
  int32_t* out_indices = indices->data();
  float* out_values = values->data();
  int64_t pos = 0;
  for (const CandidateSet::Lane& lane : set.lanes) {
    const size_t m = lane.values.size();
    for (size_t i = 0; i < m; ++i) {
      out_indices[pos] = lane.indices[i];
      out_values[pos] = lane.values[i];
      pos += MagnitudeKey(lane.values[i]) >= t;
    }
  }
  indices->resize(count);
  values->resize(count);
}

int64_t Selector::CountAtLeastKey(absl::Span<const float> input, uint32_t t) {
  std::vector<int64_t> counts(lanes(), 0);
  ParallelFor(static_cast<int64_t>(input.size()), kGrain,
              [&](int lane, int64_t begin, int64_t end) {
                counts[lane] = CountAtLeastIn(input.data() + begin, end - begin, t);
              });
  ++stats_.full_passes;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

uint32_t Selector::KthLargestKeyFull(absl::Span<const float> input, int64_t k) {
  const int64_t n = static_cast<int64_t>(input.size());
  const size_t high = size_t{1} << kHighBits, low = size_t{1} << kLowBits;
  const int nl = lanes();
  histogram_.assign(high * nl, 0);
  ParallelFor(n, kGrain, [&](int lane, int64_t begin, int64_t end) {
    uint32_t* h = histogram_.data() + lane * high;
    for (int64_t i = begin; i < end; ++i) ++h[MagnitudeKey(input[i]) >> kLowBits];
  });
  // The digit holding the k-th largest key among `size` per-lane counts, from the top; keys in
  // higher digits accumulate into `above`.
  int64_t above = 0;
  auto descend = [&](size_t size) {
    uint32_t digit = static_cast<uint32_t>(size - 1);
    for (;; --digit) {
      int64_t c = 0;
      for (int l = 0; l < nl; ++l) c += histogram_[l * size + digit];
      if (above + c >= k) return digit;
      above += c;
    }
  };
  const uint32_t bucket = descend(high);
  histogram_.assign(low * nl, 0);
  ParallelFor(n, kGrain, [&](int lane, int64_t begin, int64_t end) {
    uint32_t* h = histogram_.data() + lane * low;
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t key = MagnitudeKey(input[i]);
      if ((key >> kLowBits) == bucket) ++h[key & (low - 1)];
    }
  });
  stats_.full_passes += 2;
  return (bucket << kLowBits) | descend(low);
}

absl::Status Selector::TopK(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                            std::vector<int32_t>* indices, std::vector<float>* values) {
  const size_t kept = static_cast<size_t>(std::clamp<int64_t>(k, 0, input.size()));
  indices->resize(kept);
  values->resize(kept);
  absl::Status s = TopK(input, k, tensor_name, indices->data(), values->data());
  if (!s.ok()) {
    indices->clear();
    values->clear();
  }
  return s;
}

absl::Status Selector::TopK(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                            int32_t* indices, float* values) {
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckSize(n, tensor_name));
  if (k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': top-k needs k >= 0, got %d", tensor_name, k));
  }
  k = std::min(k, n);
  if (k == 0 || k == n) {
    RETURN_IF_ERROR(CheckInput(input, tensor_name, pool_));
    ++stats_.full_passes;
    ParallelFor(k, kGrain, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) indices[i] = static_cast<int32_t>(i);
      std::copy(input.begin() + begin, input.begin() + end, values + begin);
    });
    return absl::OkStatus();
  }
  if (!SampleTopK(input, &sample_)) return CheckInput(input, tensor_name, pool_);
  const uint32_t cut = EstimateCut(sample_, n, k, kTopKSampleRun);
  Gather(input, cut, 2 * k + 4096, k, /*sum_abs=*/false, &set_);
  if (set_.first_bad >= 0) {
    return NonFiniteError(tensor_name, set_.first_bad, input[set_.first_bad]);
  }
  if (!set_.above_complete || set_.count() < k) {
    stats_.fallback = true;
    Gather(input, KthLargestKeyFull(input, k), k, k, /*sum_abs=*/false, &set_);
  }
  EmitTopK(set_, k, indices, values);
  return absl::OkStatus();
}

absl::Status Selector::FilterAtLeast(absl::Span<const float> input, uint32_t cut,
                                     std::string_view tensor_name, std::vector<int32_t>* indices,
                                     std::vector<float>* values) {
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckSize(n, tensor_name));
  Gather(input, std::min(cut, kNonFiniteKey - 1), n, n, /*sum_abs=*/false, &set_);
  if (set_.first_bad >= 0) {
    return NonFiniteError(tensor_name, set_.first_bad, input[set_.first_bad]);
  }
  EmitAtLeast(set_, cut, indices, values);
  return absl::OkStatus();
}

absl::Status TopK(absl::Span<const float> input, int64_t k, ThreadPool* pool,
                  std::vector<int32_t>* indices, std::vector<float>* values) {
  Selector selector(pool);
  return selector.TopK(input, k, kUnnamed, indices, values);
}

absl::Status ThresholdFilter(absl::Span<const float> input, float threshold, ThreadPool* pool,
                             std::vector<int32_t>* indices, std::vector<float>* values) {
  if (!std::isfinite(threshold)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("threshold filter: threshold must be finite, got %f", threshold));
  }
  Selector selector(pool);
  return selector.FilterAtLeast(input, ThresholdKey(threshold), kUnnamed, indices, values);
}

int64_t CountAtLeast(absl::Span<const float> input, float threshold, ThreadPool* pool) {
  if (std::isnan(threshold)) return 0;
  Selector selector(pool);
  return selector.CountAtLeastKey(input, ThresholdKey(threshold));
}

}  // namespace gravac::kernels::cpu

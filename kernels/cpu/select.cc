#include "kernels/cpu/select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"

namespace gravac::kernels::cpu {
namespace {

constexpr int64_t kBlock = 16;         // elements tested together before any branch
constexpr int64_t kSuperBlock = 4096;  // unit of parallel work and of |x| partial sums
constexpr int64_t kGrainSuperBlocks = 16;

constexpr int64_t kGrain = 1 << 16;  // elements per parallel chunk at least
constexpr int kHighBits = 16;        // first histogram digit: key bits 30..15
constexpr int kLowBits = 15;         // second digit: key bits 14..0
constexpr std::string_view kUnnamed = "(unnamed)";

struct KthResult {
  uint32_t key = 0;
  int64_t greater = 0;  // keys strictly greater than `key`
};

// *histogram = counts of the top 16 bits of the keys `for_each` visits.
template <typename ForEach>
void HighHistogram(const ForEach& for_each, std::vector<uint32_t>* histogram) {
  histogram->assign(size_t{1} << kHighBits, 0);
  uint32_t* h = histogram->data();
  for_each([h](uint32_t key) { ++h[key >> kLowBits]; });
}

// The bucket holding the r-th largest key (1 <= r <= count) of a HighHistogram, and the number
// of keys in higher buckets.
uint32_t HighBucket(const std::vector<uint32_t>& histogram, int64_t r, int64_t* above) {
  const uint32_t* h = histogram.data();
  *above = 0;
  uint32_t bucket = (1u << kHighBits) - 1;
  for (;; --bucket) {
    if (*above + h[bucket] >= r) break;
    *above += h[bucket];
  }
  return bucket;
}

// The r-th largest key (1 <= r <= count) of the keys `for_each` visits, from their
// HighHistogram: nth_element on the keys of the boundary bucket.
template <typename ForEach>
KthResult KthLargestFromHistogram(const ForEach& for_each, int64_t r,
                                  const std::vector<uint32_t>& histogram,
                                  std::vector<uint32_t>* scratch) {
  int64_t above = 0;
  const uint32_t bucket = HighBucket(histogram, r, &above);
  scratch->clear();
  for_each([scratch, bucket](uint32_t key) {
    if ((key >> kLowBits) == bucket) scratch->push_back(key);
  });
  int64_t rank = r - above;  // 1-based within the bucket
  std::nth_element(scratch->begin(), scratch->begin() + (rank - 1), scratch->end(),
                   std::greater<uint32_t>());
  KthResult result{(*scratch)[rank - 1], above};
  for (uint32_t key : *scratch) result.greater += key > result.key;
  return result;
}

// The r-th largest key (1 <= r <= count) of the keys `for_each` visits (twice).
template <typename ForEach>
KthResult KthLargest(const ForEach& for_each, int64_t r, std::vector<uint32_t>* histogram,
                     std::vector<uint32_t>* scratch) {
  HighHistogram(for_each, histogram);
  return KthLargestFromHistogram(for_each, r, *histogram, scratch);
}

// Appends to a lane through raw pointers: the vectors grow by resize (amortised doubling) while
// gathering and are trimmed to the stored count by Finish().
class LaneWriter {
 public:
  explicit LaneWriter(CandidateSet::Lane* lane) : lane_(lane) { Refresh(); }
  void Reserve(int64_t extra) {
    if (size_ + extra > capacity_) {
      const int64_t c = std::max({size_ + extra, 2 * capacity_, int64_t{4096}});
      lane_->indices.resize(c);
      lane_->values.resize(c);
      Refresh();
    }
  }
  // Writes at size + offset (within a Reserve) without advancing.
  void Put(int64_t offset, int64_t i, float v) {
    indices_[size_ + offset] = static_cast<int32_t>(i);
    values_[size_ + offset] = v;
  }
  void Advance(int64_t count) { size_ += count; }
  void Finish() {
    lane_->indices.resize(size_);
    lane_->values.resize(size_);
  }

 private:
  void Refresh() {
    capacity_ = static_cast<int64_t>(lane_->values.size());
    indices_ = lane_->indices.data();
    values_ = lane_->values.data();
  }

  CandidateSet::Lane* lane_;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
  int32_t* indices_ = nullptr;
  float* values_ = nullptr;
};

// One element with key >= cut (room for it reserved).
inline void Take(float v, int64_t i, uint32_t cut, int64_t budget, int64_t tie_cap,
                 CandidateSet::Lane* l, LaneWriter* w) {
  const uint32_t key = MagnitudeKey(v);
  if (key > l->max_key) l->max_key = key;
  if (key >= kNonFiniteKey && l->first_bad < 0) l->first_bad = i;
  if (key > cut) {
    ++l->above;
    if (l->above_stored >= budget) return;
    ++l->above_stored;
  } else {
    ++l->ties;
    if (l->ties_stored >= tie_cap) return;
    ++l->ties_stored;
  }
  w->Put(0, i, v);
  w->Advance(1);
}

// Whether a block has at least 4 hits, from which TakeBlock beats one Take per hit (no
// popcount instruction in the x86-64 baseline).
inline bool AtLeastFourBits(uint32_t m) {
  m &= m - 1;
  m &= m - 1;
  m &= m - 1;
  return m != 0;
}

// A block with many hits and room under both caps: the same as Take on each hit, branch-free.
inline void TakeBlock(const float* data, int64_t i, uint32_t cut, CandidateSet::Lane* l,
                      LaneWriter* w) {
  int64_t pos = 0, above = 0, ties = 0;
  uint32_t max_key = l->max_key, bad = 0;
  for (int64_t j = 0; j < kBlock; ++j) {
    const float v = data[i + j];
    const uint32_t key = MagnitudeKey(v);
    const bool hit = key >= cut;
    w->Put(pos, i + j, v);
    pos += hit;
    above += key > cut;
    ties += hit && key == cut;
    max_key = std::max(max_key, hit ? key : 0u);
    bad |= key >= kNonFiniteKey;
  }
  w->Advance(pos);
  l->above += above;
  l->above_stored += above;
  l->ties += ties;
  l->ties_stored += ties;
  l->max_key = max_key;
  if (bad != 0 && l->first_bad < 0) {
    int64_t j = 0;
    while (MagnitudeKey(data[i + j]) < kNonFiniteKey) ++j;
    l->first_bad = i + j;
  }
}

// Block kernels: per 16 elements, whether any key is >= cut, the number that are, and (for the
// |x| sums) acc[j] += |x[j]|. SSE2 (every x86-64) or plain C++ with the same results.
#if defined(__SSE2__)
struct BlockOps {
  explicit BlockOps(uint32_t cut)
      : mask(_mm_set1_epi32(0x7fffffff)), below(_mm_set1_epi32(static_cast<int32_t>(cut) - 1)) {}
  __m128i Keys(const float* p) const {
    return _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), mask);
  }
  // Bit j set where element j's key is >= cut.
  uint32_t Mask(const float* p) const {
    __m128i lo =
        _mm_packs_epi32(_mm_cmpgt_epi32(Keys(p), below), _mm_cmpgt_epi32(Keys(p + 4), below));
    __m128i hi =
        _mm_packs_epi32(_mm_cmpgt_epi32(Keys(p + 8), below), _mm_cmpgt_epi32(Keys(p + 12), below));
    return static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(lo, hi)));
  }
  struct Acc {  // acc[j] for j = 4q + lane of a[q]
    __m128 a[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  };
  void AddAbs(const float* p, Acc* acc) const {
    for (int q = 0; q < 4; ++q) {
      acc->a[q] = _mm_add_ps(acc->a[q], _mm_castsi128_ps(Keys(p + 4 * q)));
    }
  }
  static void Store(const Acc& acc, float* out) {
    for (int q = 0; q < 4; ++q) _mm_storeu_ps(out + 4 * q, acc.a[q]);
  }
  int32_t Count(const float* p) const {
    __m128i c = _mm_add_epi32(
        _mm_add_epi32(_mm_cmpgt_epi32(Keys(p), below), _mm_cmpgt_epi32(Keys(p + 4), below)),
        _mm_add_epi32(_mm_cmpgt_epi32(Keys(p + 8), below), _mm_cmpgt_epi32(Keys(p + 12), below)));
    alignas(16) int32_t lanes[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), c);
    return -(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
  }
  __m128i mask, below;
};
#else
struct BlockOps {
  explicit BlockOps(uint32_t cut) : cut(cut) {}
  uint32_t Mask(const float* p) const {
    uint32_t mask = 0;
    for (int j = 0; j < kBlock; ++j) mask |= static_cast<uint32_t>(MagnitudeKey(p[j]) >= cut) << j;
    return mask;
  }
  struct Acc {
    float a[kBlock] = {};
  };
  void AddAbs(const float* p, Acc* acc) const {
    for (int j = 0; j < kBlock; ++j) acc->a[j] += std::fabs(p[j]);
  }
  static void Store(const Acc& acc, float* out) { std::copy(acc.a, acc.a + kBlock, out); }
  int32_t Count(const float* p) const {
    int32_t c = 0;
    for (int j = 0; j < kBlock; ++j) c += MagnitudeKey(p[j]) >= cut;
    return c;
  }
  uint32_t cut;
};
#endif

// Gathers superblocks [sb_begin, sb_end) into `lane`; with kSum, fills sums[sb].
template <bool kSum>
void GatherRange(const float* data, int64_t n, int64_t sb_begin, int64_t sb_end, uint32_t cut,
                 int64_t budget, int64_t tie_cap, CandidateSet::Lane* lane, LaneWriter* writer,
                 double* sums) {
  const BlockOps ops(cut);
  for (int64_t sb = sb_begin; sb < sb_end; ++sb) {
    const int64_t begin = sb * kSuperBlock, end = std::min(n, begin + kSuperBlock);
    BlockOps::Acc acc;
    int64_t i = begin;
    for (; i + kBlock <= end; i += kBlock) {
      if constexpr (kSum) ops.AddAbs(data + i, &acc);
      uint32_t mask = ops.Mask(data + i);
      if (mask == 0) continue;
      writer->Reserve(kBlock);
      if (AtLeastFourBits(mask) && lane->above_stored + kBlock <= budget &&
          lane->ties_stored + kBlock <= tie_cap) {
        TakeBlock(data, i, cut, lane, writer);
        continue;
      }
      for (; mask != 0; mask &= mask - 1) {
        const int64_t j = i + std::countr_zero(mask);
        Take(data[j], j, cut, budget, tie_cap, lane, writer);
      }
    }
    double sum = 0.0;
    for (; i < end; ++i) {
      if (MagnitudeKey(data[i]) >= cut) {
        writer->Reserve(1);
        Take(data[i], i, cut, budget, tie_cap, lane, writer);
      }
      if constexpr (kSum) sum += std::fabs(data[i]);
    }
    if constexpr (kSum) {
      float partial[kBlock];
      BlockOps::Store(acc, partial);
      for (int64_t j = 0; j < kBlock; ++j) sum += partial[j];
      sums[sb] = sum;
    }
  }
}

// Number of the m values at p whose key is >= t.
int64_t CountAtLeastIn(const float* p, int64_t m, uint32_t t) {
  const BlockOps ops(t);
  int64_t count = 0, i = 0;
  for (; i + kBlock <= m; i += kBlock) count += ops.Count(p + i);
  for (; i < m; ++i) count += MagnitudeKey(p[i]) >= t;
  return count;
}

}  // namespace

absl::Status CheckCompressArgs(int64_t n, double theta, std::string_view tensor_name) {
  RETURN_IF_ERROR(CheckSize(n, tensor_name));
  if (!(theta >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': compression factor theta must be >= 1, got %f", tensor_name, theta));
  }
  return absl::OkStatus();
}

void ThresholdCounter::Reset(const CandidateSet& set) {
  set_ = &set;
  in_set_ = true;
  size_ = set.stored;
  removed_above_ = 0;
  last_t_ = 0;
  last_in_set_ = 0;
}

int64_t ThresholdCounter::Count(uint32_t t) {
  int64_t count = 0;
  if (in_set_) {
    for (const CandidateSet::Lane& lane : set_->lanes) {
      count += CountAtLeastIn(lane.values.data(), static_cast<int64_t>(lane.values.size()), t);
    }
  } else {
    count = CountAtLeastIn(values_.data(), size_, t);
  }
  last_t_ = t;
  last_in_set_ = count;
  return removed_above_ + count;
}

void ThresholdCounter::Raise() {
  if (2 * last_in_set_ <= size_) Compact(/*keep_at_least=*/true);
}

void ThresholdCounter::Lower() {
  if (2 * last_in_set_ >= size_) {
    removed_above_ += last_in_set_;
    Compact(/*keep_at_least=*/false);
  }
}

void ThresholdCounter::Compact(bool keep_at_least) {
  const int64_t kept = keep_at_least ? last_in_set_ : size_ - last_in_set_;
  other_.resize(kept + 1);  // branch-free writes: one slot for the rejects
  int64_t pos = 0;
  auto keep = [&](const float* v, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      other_[pos] = v[i];
      pos += (MagnitudeKey(v[i]) >= last_t_) == keep_at_least;
    }
  };
  if (in_set_) {
    for (const CandidateSet::Lane& lane : set_->lanes) {
      keep(lane.values.data(), static_cast<int64_t>(lane.values.size()));
    }
  } else {
    keep(values_.data(), size_);
  }
  values_.swap(other_);
  in_set_ = false;
  size_ = kept;
}

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
  HighHistogram(for_each, &histogram_);
  double variance = e;  // independent keys: the sample count at or above a cut is ~Poisson
  if (run > 0 && s >= 2 * run) {
    // Each stratum holds one run, so the count's variance is the sum of the strata's; a pair of
    // neighbouring strata estimates theirs by the squared difference of their runs' counts,
    // here at the floor of the histogram bucket of the expected rank (close enough for a margin).
    int64_t above = 0;
    const uint32_t c = HighBucket(histogram_, std::clamp<int64_t>(std::llround(e), 1, s), &above)
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
    CandidateSet::Lane* lane = &set->lanes[lane_id];
    LaneWriter writer(lane);
    if (sum_abs) {
      GatherRange<true>(input.data(), n, begin, end, cut, budget, tie_cap, lane, &writer,
                        block_sums_.data());
    } else {
      GatherRange<false>(input.data(), n, begin, end, cut, budget, tie_cap, lane, &writer, nullptr);
    }
    writer.Finish();
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
  if (k == 0) return;
  auto for_each = [&set](auto&& fn) {
    for (const CandidateSet::Lane& lane : set.lanes) {
      for (float v : lane.values) fn(MagnitudeKey(v));
    }
  };
  const KthResult kth = KthLargest(for_each, k, &histogram_, &scratch_);
  int64_t ties_needed = k - kth.greater;
  int64_t pos = 0;
  for (const CandidateSet::Lane& lane : set.lanes) {
    const size_t m = lane.values.size();
    for (size_t i = 0; i < m; ++i) {
      const uint32_t key = MagnitudeKey(lane.values[i]);
      if (key > kth.key || (key == kth.key && ties_needed > 0)) {
        if (key == kth.key) --ties_needed;
        (*indices)[pos] = lane.indices[i];
        (*values)[pos] = lane.values[i];
        ++pos;
      }
    }
  }
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
  int64_t above = 0;
  uint32_t bucket = static_cast<uint32_t>(high - 1);
  for (;; --bucket) {
    int64_t c = 0;
    for (int l = 0; l < nl; ++l) c += histogram_[l * high + bucket];
    if (above + c >= k) break;
    above += c;
  }
  histogram_.assign(low * nl, 0);
  ParallelFor(n, kGrain, [&](int lane, int64_t begin, int64_t end) {
    uint32_t* h = histogram_.data() + lane * low;
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t key = MagnitudeKey(input[i]);
      if ((key >> kLowBits) == bucket) ++h[key & (low - 1)];
    }
  });
  stats_.full_passes += 2;
  uint32_t digit = static_cast<uint32_t>(low - 1);
  for (;; --digit) {
    int64_t c = 0;
    for (int l = 0; l < nl; ++l) c += histogram_[l * low + digit];
    if (above + c >= k) break;
    above += c;
  }
  return (bucket << kLowBits) | digit;
}

absl::Status Selector::TopK(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                            std::vector<int32_t>* indices, std::vector<float>* values) {
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
    indices->resize(k);
    values->resize(k);
    ParallelFor(k, kGrain, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) (*indices)[i] = static_cast<int32_t>(i);
      std::copy(input.begin() + begin, input.begin() + end, values->begin() + begin);
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

void PrepareSparseOutput(int64_t n, ValueType type, Compressed* out) {
  out->dense_size = n;
  out->dense = false;
  out->value_type = type;
  out->implicit_indices = false;
  out->seed = 0;
}

absl::Status FinishSparseOutput(std::string_view tensor_name, Compressed* out) {
  if (out->value_type == ValueType::kFloat32) return absl::OkStatus();
  return RoundToValueTypeChecked(out->value_type, absl::MakeSpan(out->values), tensor_name,
                                 out->indices);
}

absl::Status SelectFrom(const Compressed& first, double theta, const CompressContext& ctx,
                        Compressed* out) {
  RETURN_IF_ERROR(CheckCompressArgs(first.dense_size, theta, ctx.tensor_name));
  return SelectTopKFromSparse(first, KeepCount(first.dense_size, theta), out);
}

int64_t CountAtLeast(absl::Span<const float> input, float threshold, ThreadPool* pool) {
  if (std::isnan(threshold)) return 0;
  Selector selector(pool);
  return selector.CountAtLeastKey(input, ThresholdKey(threshold));
}

absl::Status SelectTopKFromSparse(const Compressed& first, int64_t k, Compressed* out) {
  if (first.dense || first.indices.size() != first.values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "select top-k from sparse: input must be sparse with one index per value (dense=%d, "
        "%d indices, %d values)",
        first.dense, first.indices.size(), first.values.size()));
  }
  if (k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("select top-k from sparse: k must be >= 0, got %d", k));
  }
  if (out == &first) {
    Compressed copy = first;
    return SelectTopKFromSparse(copy, k, out);
  }
  const int64_t m = first.count();
  k = std::min(k, m);
  out->dense_size = first.dense_size;
  out->dense = false;
  out->value_type = first.value_type;
  out->implicit_indices = false;
  out->seed = 0;
  out->indices.resize(k);
  out->values.resize(k);
  if (k == m) {
    std::copy(first.indices.begin(), first.indices.end(), out->indices.begin());
    std::copy(first.values.begin(), first.values.end(), out->values.begin());
    return absl::OkStatus();
  }
  if (k == 0) return absl::OkStatus();
  std::vector<uint32_t> histogram, scratch;
  auto for_each = [&first](auto&& fn) {
    for (float v : first.values) fn(MagnitudeKey(v));
  };
  const KthResult kth = KthLargest(for_each, k, &histogram, &scratch);
  int64_t ties_needed = k - kth.greater, pos = 0;
  for (int64_t i = 0; i < m; ++i) {
    const uint32_t key = MagnitudeKey(first.values[i]);
    if (key > kth.key || (key == kth.key && ties_needed > 0)) {
      if (key == kth.key) --ties_needed;
      out->indices[pos] = first.indices[i];
      out->values[pos] = first.values[i];
      ++pos;
    }
  }
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cpu

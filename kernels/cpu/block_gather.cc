#include "kernels/cpu/block_gather.h"

#include <algorithm>
#include <bit>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gravac::kernels::cpu::internal {
namespace {

constexpr int64_t kBlock = 16;  // elements tested together before any branch

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

}  // namespace

void GatherSuperBlocks(const float* data, int64_t n, int64_t sb_begin, int64_t sb_end, uint32_t cut,
                       int64_t budget, int64_t tie_cap, CandidateSet::Lane* lane, double* sums) {
  LaneWriter writer(lane);
  if (sums != nullptr) {
    GatherRange<true>(data, n, sb_begin, sb_end, cut, budget, tie_cap, lane, &writer, sums);
  } else {
    GatherRange<false>(data, n, sb_begin, sb_end, cut, budget, tie_cap, lane, &writer, nullptr);
  }
  writer.Finish();
}

int64_t CountAtLeastIn(const float* p, int64_t m, uint32_t t) {
  const BlockOps ops(t);
  int64_t count = 0, i = 0;
  for (; i + kBlock <= m; i += kBlock) count += ops.Count(p + i);
  for (; i < m; ++i) count += MagnitudeKey(p[i]) >= t;
  return count;
}

}  // namespace gravac::kernels::cpu::internal

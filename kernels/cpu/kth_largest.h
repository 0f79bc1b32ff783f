// The k-th largest magnitude key of a set of keys without sorting them: a 16-bit histogram of
// the keys' high digit finds the bucket holding the k-th largest, and an nth_element on that
// bucket's keys finds the key. EmitTopKOf then walks the elements in index order keeping those
// above it and the lowest-index ties. Keys are MagnitudeKey values (candidate_set.h).
//
// A ForEach is a callable that visits every key: for_each(fn) calls fn(key) for each, in the same
// order each time (it is called twice).
//
// Thread-safety: stateless; the scratch vectors are the caller's.
#ifndef GRAVAC_KERNELS_CPU_KTH_LARGEST_H_
#define GRAVAC_KERNELS_CPU_KTH_LARGEST_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/candidate_set.h"

namespace gravac::kernels::cpu::internal {

inline constexpr int kHighBits = 16;  // first histogram digit: key bits 30..15
inline constexpr int kLowBits = 15;   // second digit: key bits 14..0

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
inline uint32_t HighBucket(const std::vector<uint32_t>& histogram, int64_t r, int64_t* above) {
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

// Exact top-k (1 <= k <= count) of the elements `for_each_element` visits in ascending index
// order: for_each_element(fn) calls fn(index, value) for each. Writes the k kept elements,
// ascending, to indices[0, k) and values[0, k).
template <typename ForEachElement>
void EmitTopKOf(const ForEachElement& for_each_element, int64_t k, int32_t* indices, float* values,
                std::vector<uint32_t>* histogram, std::vector<uint32_t>* scratch) {
  auto for_each_key = [&for_each_element](auto&& fn) {
    for_each_element([&fn](int32_t, float v) { fn(MagnitudeKey(v)); });
  };
  const KthResult kth = KthLargest(for_each_key, k, histogram, scratch);
  int64_t ties_needed = k - kth.greater, pos = 0;
  for_each_element([&](int32_t index, float v) {
    const uint32_t key = MagnitudeKey(v);
    if (key > kth.key || (key == kth.key && ties_needed > 0)) {
      if (key == kth.key) --ties_needed;
      indices[pos] = index;
      values[pos] = v;
      ++pos;
    }
  });
}

}  // namespace gravac::kernels::cpu::internal

#endif  // GRAVAC_KERNELS_CPU_KTH_LARGEST_H_

// Magnitude keys and the candidate set of the CPU selection kernels (select.h).
//
// Elements are compared by |x| through MagnitudeKey (the float bits with the sign cleared),
// which orders like |x| for finite values (-0 and +0 tie; subnormals are ordered); a non-finite
// element's key is >= kNonFiniteKey, above any finite one.
//
// A CandidateSet is what one parallel pass over a tensor gathered: the elements whose key is
// >= `cut` (Selector::Gather).
//
// Thread-safety: plain values.
#ifndef GRAVAC_KERNELS_CPU_CANDIDATE_SET_H_
#define GRAVAC_KERNELS_CPU_CANDIDATE_SET_H_

#include <bit>
#include <cstdint>
#include <vector>

namespace gravac::kernels::cpu {

// |x| as an unsigned integer ordered like |x| (finite values); non-finite keys are >= this.
inline uint32_t MagnitudeKey(float x) { return std::bit_cast<uint32_t>(x) & 0x7fffffffu; }
inline constexpr uint32_t kNonFiniteKey = 0x7f800000u;
// The cut key for "|x| >= threshold": 0 for a threshold <= 0 (threshold must not be NaN).
inline uint32_t ThresholdKey(float threshold) {
  return threshold > 0.0f ? MagnitudeKey(threshold) : 0u;
}

// The elements whose key is >= `cut`, gathered by one parallel pass (Selector::Gather).
// lanes[i] holds the i-th contiguous chunk's elements in ascending index order, so the lanes
// concatenated are ascending. Per lane, elements with key > cut are stored up to `budget` and
// elements with key == cut up to `tie_cap`; beyond that they are only counted.
struct CandidateSet {
  struct Lane {
    std::vector<int32_t> indices;
    std::vector<float> values;
    int64_t above = 0;  // key > cut, seen
    int64_t above_stored = 0;
    int64_t ties = 0;  // key == cut, seen
    int64_t ties_stored = 0;
    int64_t first_bad = -1;  // first non-finite index in the chunk, -1 if none
    uint32_t max_key = 0;    // largest key >= cut seen (0 if none)
  };
  uint32_t cut = 0;
  std::vector<Lane> lanes;
  int64_t above = 0;  // totals over the lanes
  int64_t ties = 0;
  int64_t stored = 0;
  bool above_complete = true;  // every element with key > cut is stored
  bool ties_complete = true;   // every element with key == cut is stored
  int64_t first_bad = -1;      // first non-finite index of the tensor, -1 if none
  uint32_t max_key = 0;        // largest key of the tensor when count() > 0
  double abs_sum = 0.0;        // sum of |x| over the tensor, when Gather was asked for it

  int64_t count() const { return above + ties; }  // elements with key >= cut
  // True when every element with key >= t is stored.
  bool Holds(uint32_t t) const {
    return above_complete && (t > cut || (t == cut && ties_complete));
  }
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_CANDIDATE_SET_H_

// ThresholdCounter: exact counts of a CandidateSet's elements at or above a key, for the
// threshold searches of dgc and redsync (sparse_selection.h).
//
// Thread-safety: one caller at a time (keeps scratch).
#ifndef GRAVAC_KERNELS_CPU_THRESHOLD_COUNTER_H_
#define GRAVAC_KERNELS_CPU_THRESHOLD_COUNTER_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/candidate_set.h"

namespace gravac::kernels::cpu {

// Counts elements >= t among a CandidateSet's stored elements for a bracketing search: after
// Count(t), Raise() says every later threshold is >= t and Lower() that every later one is < t.
// Counts are read-only vectorised scans; when a step makes at least half of the working set
// irrelevant (never counted again, or always counted) that half is dropped, so a search costs a
// few scans of the set, not a full pass over the tensor per step. The set must outlive the
// counter's use and have above_complete && ties_complete; thresholds must be >= set.cut.
class ThresholdCounter {
 public:
  void Reset(const CandidateSet& set);
  int64_t Count(uint32_t t);  // exact count of elements with key >= t (t >= set.cut)
  void Raise();               // after Count(t): later thresholds are >= t
  void Lower();               // after Count(t): later thresholds are < t

 private:
  // Keeps the working elements with (key >= last_t_) == keep_at_least.
  void Compact(bool keep_at_least);

  const CandidateSet* set_ = nullptr;
  bool in_set_ = true;         // the working set is set_'s lanes, else values_
  std::vector<float> values_;  // the working set once compacted (signed values; keys by mask)
  std::vector<float> other_;
  int64_t size_ = 0;           // elements in the working set
  int64_t removed_above_ = 0;  // elements dropped because every later threshold counts them
  uint32_t last_t_ = 0;
  int64_t last_in_set_ = 0;  // working elements >= last_t_
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_THRESHOLD_COUNTER_H_

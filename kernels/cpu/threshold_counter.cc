#include "kernels/cpu/threshold_counter.h"

#include "kernels/cpu/block_gather.h"

namespace gravac::kernels::cpu {

using internal::CountAtLeastIn;

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

}  // namespace gravac::kernels::cpu

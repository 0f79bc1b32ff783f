// The gather and count kernels of the CPU selection (select.h): per block of 16 elements, one
// branch-free test of which keys are >= the cut (SSE2 on every x86-64, plain C++ elsewhere, with
// the same results), then the hits are appended to a CandidateSet lane.
//
// Thread-safety: stateless; each call writes only its own lane and sums.
#ifndef GRAVAC_KERNELS_CPU_BLOCK_GATHER_H_
#define GRAVAC_KERNELS_CPU_BLOCK_GATHER_H_

#include <cstdint>

#include "kernels/cpu/candidate_set.h"

namespace gravac::kernels::cpu::internal {

inline constexpr int64_t kSuperBlock = 4096;  // unit of parallel work and of |x| partial sums

// Gathers the elements with key >= cut of superblocks [sb_begin, sb_end) of data[0, n) into
// `lane` (appended after what it holds; stored up to budget above the cut and tie_cap at it,
// counted beyond). With sums != nullptr, also sums[sb] = sum of |x| over superblock sb, added in
// a fixed order (independent of how the superblocks are split among lanes).
void GatherSuperBlocks(const float* data, int64_t n, int64_t sb_begin, int64_t sb_end, uint32_t cut,
                       int64_t budget, int64_t tie_cap, CandidateSet::Lane* lane, double* sums);

// Number of the m values at p whose key is >= t.
int64_t CountAtLeastIn(const float* p, int64_t m, uint32_t t);

}  // namespace gravac::kernels::cpu::internal

#endif  // GRAVAC_KERNELS_CPU_BLOCK_GATHER_H_

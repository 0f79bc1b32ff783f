// Random-k: k = KeepCount(n, θ) distinct indices drawn from a seed that every rank derives
// alike, so only the values travel (the receiver regenerates the indices from the seed).
//
// Seed:    RandomKSeed(job_seed, tensor_name, step) = splitmix64 finaliser of the FNV-1a 64 hash
//          of (job_seed as 8 little-endian bytes, the name's bytes, step as 8 little-endian
//          bytes). No std::hash, so every build and platform agrees.
// Indices: RandomKIndices(n, k, seed) gives index i the priority P(i) = the (i+1)-th output of
//          splitmix64 seeded with `seed` (a counter-based PRNG: P(i) = mix64(seed + (i+1)·γ)),
//          and returns the k indices of smallest (P(i), i), ascending. No std:: distributions,
//          whose output is implementation-defined; only 64-bit integer arithmetic, so every
//          platform (and a GPU twin) computes the same set. It streams once over [0, n) in
//          parallel on `pool` (may be nullptr) computing priorities, keeps the ~k + O(sqrt k)
//          candidates below a threshold, then cuts them to exactly k: O(n) arithmetic, no reads,
//          O(min(k, n - k)) memory (for k > n/2 it picks the n - k largest and complements).
//          The set for k2 < k1 under the same seed is a subset of the set for k1 ("nested").
//
// RandomKCompressor ("randomk"): Compress keeps exactly k values at the seeded indices, rounded
// to options.value_type, with implicit_indices = true and seed = RandomKSeed(ctx...). The seed
// does not depend on θ, so by nesting, CompressFrom(first, θ_c) — a seeded random subset of
// `first`'s entries, namely the KeepCount(n, θ_c) of smallest priority, found in O(count) — is
// exactly what Compress(p, θ_c) gives, and its indices regenerate from (n, k, seed) like any
// randomk output. CompressFrom needs θ_c to keep no more than `first` holds.
//
// Thread-safety: the free functions are stateless; a RandomKCompressor follows the Compressor
// contract (one caller at a time).
#ifndef GRAVAC_KERNELS_CPU_RANDOMK_H_
#define GRAVAC_KERNELS_CPU_RANDOMK_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"

namespace gravac::kernels::cpu {

uint64_t RandomKSeed(uint64_t job_seed, std::string_view tensor_name, int64_t step);

// Fills *out with k distinct indices in [0, n), ascending. Fails with InvalidArgument unless
// 0 <= k <= n <= 2^31 - 1. `pool` only changes the speed, never the result.
absl::Status RandomKIndices(int64_t n, int64_t k, uint64_t seed, std::vector<int32_t>* out,
                            ThreadPool* pool = nullptr);

// Priority of index i under `seed` (the order RandomKIndices selects by).
uint64_t RandomKPriority(uint64_t seed, int64_t i);

class RandomKCompressor : public Compressor {
 public:
  explicit RandomKCompressor(const CompressorOptions& options);

  std::string_view name() const override { return "randomk"; }
  bool SecondLevelEqualsDirect() const override { return true; }

  absl::Status Compress(absl::Span<const float> input, double theta, const CompressContext& ctx,
                        Compressed* out) override;
  absl::Status CompressFrom(const Compressed& first, double theta, const CompressContext& ctx,
                            Compressed* out) override;

 private:
  CompressorOptions options_;
  std::vector<std::pair<uint64_t, int32_t>> scratch_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_RANDOMK_H_

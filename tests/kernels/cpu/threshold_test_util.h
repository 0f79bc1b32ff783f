// Inputs and checks shared by the tests of the selection compressors (topk, dgc, redsync): input
// distributions with light and heavy tails and ties, the stable-sort top-k oracle, and the
// threshold-set property of an output.
#ifndef GRAVAC_TESTS_KERNELS_CPU_THRESHOLD_TEST_UTIL_H_
#define GRAVAC_TESTS_KERNELS_CPU_THRESHOLD_TEST_UTIL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/compressed.h"

namespace gravac::kernels::cpu::testing {

enum class Dist { kNormal, kLaplace, kCauchy, kTies };

inline std::vector<float> Make(Dist d, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::exponential_distribution<float> exponential;
  std::cauchy_distribution<float> cauchy;
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<float> x(n);
  for (float& v : x) {
    switch (d) {
      case Dist::kNormal:
        v = normal(rng);
        break;
      case Dist::kLaplace:
        v = (rng() & 1 ? 1.0f : -1.0f) * exponential(rng);
        break;
      case Dist::kCauchy:
        v = std::clamp(cauchy(rng), -1e30f, 1e30f);
        break;
      case Dist::kTies:
        v = static_cast<float>(small(rng));
        break;
    }
  }
  return x;
}

inline std::string Name(Dist d) {
  const char* names[] = {"Normal", "Laplace", "Cauchy", "Ties"};
  return names[static_cast<int>(d)];
}

// Stable sort oracle: |x| descending, index ascending; first k; by index.
inline std::vector<int32_t> Oracle(const std::vector<float>& x, int64_t k) {
  std::vector<std::pair<float, int32_t>> pairs(x.size());
  for (size_t i = 0; i < x.size(); ++i) pairs[i] = {std::fabs(x[i]), static_cast<int32_t>(i)};
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t> top;
  for (int64_t i = 0; i < k; ++i) top.push_back(pairs[i].second);
  std::sort(top.begin(), top.end());
  return top;
}

// Indices strictly ascending, values bit-equal to the input, and every kept |x| >= every
// dropped |x|.
inline void ExpectThresholdSet(const std::vector<float>& x, const Compressed& c) {
  ASSERT_EQ(c.indices.size(), c.values.size());
  std::vector<bool> kept(x.size(), false);
  float min_kept = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < c.indices.size(); ++i) {
    const int32_t idx = c.indices[i];
    ASSERT_TRUE(idx >= 0 && idx < static_cast<int64_t>(x.size()));
    if (i > 0) {
      ASSERT_LT(c.indices[i - 1], idx);
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(c.values[i]), std::bit_cast<uint32_t>(x[idx]));
    kept[idx] = true;
    min_kept = std::min(min_kept, std::fabs(x[idx]));
  }
  float max_dropped = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!kept[i]) max_dropped = std::max(max_dropped, std::fabs(x[i]));
  }
  if (!c.indices.empty() && c.indices.size() < x.size()) {
    EXPECT_GE(min_kept, max_dropped);
  }
}

}  // namespace gravac::kernels::cpu::testing

#endif  // GRAVAC_TESTS_KERNELS_CPU_THRESHOLD_TEST_UTIL_H_

#include "bench/bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "absl/strings/str_format.h"

namespace gravac::bench {
namespace {

constexpr int64_t kBlock = 1 << 16;  // elements per independently seeded block of data

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Runs body(lane, begin, end) over [0, n) on `pool`, or on the caller alone when it is nullptr.
void ForLanes(int64_t n, int64_t grain, ThreadPool* pool, const ThreadPool::Body& body) {
  if (pool == nullptr) {
    if (n > 0) body(0, 0, n);
    return;
  }
  pool->ParallelFor(n, grain, body);
}

int Lanes(ThreadPool* pool) { return pool == nullptr ? 1 : pool->size(); }

}  // namespace

absl::StatusOr<Distribution> ParseDistribution(std::string_view text) {
  if (text == "normal") return Distribution::kNormal;
  if (text == "laplace") return Distribution::kLaplace;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown distribution '%s' (known: normal, laplace)", text));
}

std::vector<float> GenerateData(int64_t n, Distribution distribution, uint64_t seed,
                                ThreadPool* pool) {
  std::vector<float> data(std::max<int64_t>(n, 0));
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ForLanes(blocks, 1, pool, [&](int, int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      std::mt19937_64 rng(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(b))));
      const int64_t end = std::min(n, (b + 1) * kBlock);
      if (distribution == Distribution::kNormal) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int64_t i = b * kBlock; i < end; ++i) data[i] = normal(rng);
      } else {
        std::exponential_distribution<float> exponential(1.0f);  // |Laplace(0, 1)|
        for (int64_t i = b * kBlock; i < end; ++i) {
          float magnitude = exponential(rng);
          data[i] = (rng() & 1) ? magnitude : -magnitude;
        }
      }
    }
  });
  return data;
}

void ParallelCopy(void* dst, const void* src, int64_t bytes, ThreadPool* pool) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  ForLanes(bytes, 1 << 20, pool, [d, s](int, int64_t begin, int64_t end) {
    std::memcpy(d + begin, s + begin, end - begin);
  });
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

absl::StatusOr<OutputRules> RulesFor(std::string_view compressor) {
  OutputRules rules;
  if (compressor == "topk") {
    rules.exact_count = true;
    rules.magnitude_set = true;
  } else if (compressor == "randomk") {
    rules.exact_count = true;
  } else if (compressor == "dgc" || compressor == "redsync") {
    rules.magnitude_set = true;
  } else if (compressor == "fp16") {
    rules.dense = true;
    rules.cast_rel_tol = std::ldexp(1.0, -10);
    rules.cast_abs_tol = std::ldexp(1.0, -24);
  } else if (compressor == "bf16") {
    rules.dense = true;
    rules.cast_rel_tol = std::ldexp(1.0, -7);
    rules.cast_abs_tol = std::ldexp(1.0, -126);
  } else {
    return absl::NotFoundError(absl::StrFormat(
        "no output rules for compressor '%s' (add them to RulesFor in bench/bench_data.cc)",
        compressor));
  }
  return rules;
}

absl::Status ValidateOutput(absl::Span<const float> input, const kernels::Compressed& out,
                            const OutputRules& rules, int64_t k, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(input.size());
  if (out.dense_size != n) {
    return absl::InternalError(
        absl::StrFormat("dense_size %d != input size %d", out.dense_size, n));
  }
  if (out.dense != rules.dense) {
    return absl::InternalError(rules.dense ? "expected a dense cast, got a sparse output"
                                           : "expected a sparse output, got a dense cast");
  }
  if (rules.dense) {
    if (out.count() != n) {
      return absl::InternalError(
          absl::StrFormat("dense cast holds %d values, not %d", out.count(), n));
    }
    std::vector<int64_t> first_bad(Lanes(pool), -1);
    ForLanes(n, 1 << 18, pool, [&](int lane, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double x = input[i], v = out.values[i];
        if (!(std::fabs(v - x) <= rules.cast_rel_tol * std::fabs(x) + rules.cast_abs_tol)) {
          first_bad[lane] = i;
          return;
        }
      }
    });
    for (int64_t i : first_bad) {
      if (i >= 0) {
        return absl::InternalError(absl::StrFormat("cast value %g at index %d is too far from %g",
                                                   out.values[i], i, input[i]));
      }
    }
    return absl::OkStatus();
  }

  const int64_t count = out.count();
  if (static_cast<int64_t>(out.indices.size()) != count) {
    return absl::InternalError(
        absl::StrFormat("%d indices for %d values", out.indices.size(), count));
  }
  if ((n > 0 && count < 1) || count > n) {
    return absl::InternalError(absl::StrFormat("kept %d of %d elements", count, n));
  }
  if (rules.exact_count && count != k) {
    return absl::InternalError(
        absl::StrFormat("kept %d elements, expected exactly k = %d", count, k));
  }
  float smallest = std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = out.indices[j];
    if (index < 0 || index >= n || (j > 0 && index <= out.indices[j - 1])) {
      return absl::InternalError(absl::StrFormat(
          "index %d at position %d is out of range or not strictly ascending", index, j));
    }
    if (out.values[j] != input[index]) {
      return absl::InternalError(absl::StrFormat("value %g at index %d differs from input %g",
                                                 out.values[j], index, input[index]));
    }
    smallest = std::min(smallest, std::fabs(out.values[j]));
  }
  if (!rules.magnitude_set || count == 0) return absl::OkStatus();

  // Every element whose magnitude exceeds the smallest kept magnitude must have been kept.
  int64_t kept_above = 0;
  for (float v : out.values) kept_above += std::fabs(v) > smallest;
  std::vector<int64_t> above(Lanes(pool), 0);
  ForLanes(n, 1 << 18, pool, [&](int lane, int64_t begin, int64_t end) {
    int64_t c = 0;
    for (int64_t i = begin; i < end; ++i) c += std::fabs(input[i]) > smallest;
    above[lane] = c;
  });
  int64_t total_above = 0;
  for (int64_t c : above) total_above += c;
  if (total_above != kept_above) {
    return absl::InternalError(absl::StrFormat(
        "%d elements have |x| > %g (the smallest kept magnitude) but only %d of them were kept",
        total_above, smallest, kept_above));
  }
  return absl::OkStatus();
}

uint64_t OutputHash(const kernels::Compressed& out) {
  constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t word) { h = (h ^ word) * kPrime; };
  mix(out.dense ? 1 : 0);
  mix(static_cast<uint64_t>(out.count()));
  for (int32_t index : out.indices) mix(static_cast<uint32_t>(index));
  for (float v : out.values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    mix(bits);
  }
  return h;
}

}  // namespace gravac::bench

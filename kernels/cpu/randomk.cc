#include "kernels/cpu/randomk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"

namespace gravac::kernels::cpu {
namespace {

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Candidates of one lane, in index order.
struct Candidates {
  std::vector<uint64_t> key;
  std::vector<int32_t> index;
};

// Appends every i in [begin, end) whose key = P(i) ^ flip is <= limit.
void Gather(uint64_t seed, uint64_t flip, uint64_t limit, int64_t begin, int64_t end,
            Candidates* c) {
  constexpr int64_t kBlock = 256;
  uint64_t key[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t len = std::min(kBlock, end - b);
    uint64_t state = seed + static_cast<uint64_t>(b + 1) * kGamma;
    for (int64_t j = 0; j < len; ++j, state += kGamma) key[j] = Mix64(state) ^ flip;
    for (int64_t j = 0; j < len; ++j) {
      if (key[j] <= limit) {
        c->key.push_back(key[j]);
        c->index.push_back(static_cast<int32_t>(b + j));
      }
    }
  }
}

}  // namespace

uint64_t RandomKPriority(uint64_t seed, int64_t i) {
  return Mix64(seed + static_cast<uint64_t>(i + 1) * kGamma);
}

uint64_t RandomKSeed(uint64_t job_seed, std::string_view tensor_name, int64_t step) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  auto mix = [&h](uint8_t byte) { h = (h ^ byte) * 0x100000001b3ull; };
  for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(job_seed >> (8 * i)));
  for (char c : tensor_name) mix(static_cast<uint8_t>(c));
  for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(static_cast<uint64_t>(step) >> (8 * i)));
  return Mix64(h + kGamma);
}

absl::Status RandomKIndices(int64_t n, int64_t k, uint64_t seed, std::vector<int32_t>* out,
                            ThreadPool* pool) {
  if (n < 0 || n > kMaxElements || k < 0 || k > n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RandomKIndices: need 0 <= k <= n <= %d, got k = %d, n = %d", kMaxElements, k, n));
  }
  out->clear();
  if (k == n) {  // the whole set
    out->resize(static_cast<size_t>(n));
    std::iota(out->begin(), out->end(), 0);
    return absl::OkStatus();
  }
  if (k == 0) return absl::OkStatus();
  // Pick the m smallest keys: the k smallest priorities, or (complement) the n - k largest.
  const bool complement = k > n / 2;
  const int64_t m = complement ? n - k : k;
  const uint64_t flip = complement ? ~uint64_t{0} : 0;
  std::vector<Candidates> lanes(pool == nullptr ? 1 : pool->size());
  // Keys are uniform: a limit at quantile (m + margin)/n keeps m + O(sqrt m) candidates; too few
  // (probability < 1e-12) widens the margin, ending at "all", so the loop always terminates.
  double margin = 8.0 * std::sqrt(static_cast<double>(m)) + 64.0;
  int64_t total = 0;
  for (;;) {
    const double frac = (static_cast<double>(m) + margin) / static_cast<double>(n);
    const uint64_t limit = frac >= 1.0 ? ~uint64_t{0} : static_cast<uint64_t>(std::ldexp(frac, 64));
    for (Candidates& c : lanes) {
      c.key.clear();
      c.index.clear();
    }
    if (pool == nullptr) {
      Gather(seed, flip, limit, 0, n, &lanes[0]);
    } else {
      pool->ParallelFor(n, 1 << 15, [&](int lane, int64_t begin, int64_t end) {
        Gather(seed, flip, limit, begin, end, &lanes[lane]);
      });
    }
    total = 0;
    for (const Candidates& c : lanes) total += static_cast<int64_t>(c.key.size());
    if (total >= m) break;
    margin *= 16.0;
  }
  // Cut to exactly m: keys below the m-th smallest, then ties at it (ties order by index:
  // lowest first for the k smallest, highest first for the complement's largest).
  std::vector<uint64_t> keys;
  keys.reserve(static_cast<size_t>(total));
  for (const Candidates& c : lanes) keys.insert(keys.end(), c.key.begin(), c.key.end());
  std::vector<uint64_t> sorted = keys;
  std::nth_element(sorted.begin(), sorted.begin() + (m - 1), sorted.end());
  const uint64_t cut = sorted[m - 1];
  int64_t below = 0, ties = 0;
  for (uint64_t key : keys) {
    below += key < cut;
    ties += key == cut;
  }
  const int64_t take = m - below;  // 1 <= take <= ties
  std::vector<int32_t> picked;
  picked.reserve(static_cast<size_t>(m));
  int64_t tie_rank = 0;
  for (const Candidates& c : lanes) {
    for (size_t j = 0; j < c.key.size(); ++j) {
      bool keep = c.key[j] < cut;
      if (c.key[j] == cut) {
        keep = complement ? tie_rank >= ties - take : tie_rank < take;
        ++tie_rank;
      }
      if (keep) picked.push_back(c.index[j]);
    }
  }
  if (!complement) {
    *out = std::move(picked);
    return absl::OkStatus();
  }
  out->reserve(static_cast<size_t>(k));
  size_t p = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (p < picked.size() && picked[p] == i) {
      ++p;
    } else {
      out->push_back(i);
    }
  }
  return absl::OkStatus();
}

RandomKCompressor::RandomKCompressor(const CompressorOptions& options) : options_(options) {}

absl::Status RandomKCompressor::Compress(absl::Span<const float> input, double theta,
                                         const CompressContext& ctx, Compressed* out) {
  if (!(theta >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': randomk needs theta >= 1, got %g", ctx.tensor_name, theta));
  }
  if (absl::Status s = CheckInput(input, ctx.tensor_name, options_.pool); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(input.size());
  out->dense_size = n;
  out->dense = false;
  out->value_type = options_.value_type;
  out->implicit_indices = true;
  out->seed = RandomKSeed(ctx.job_seed, ctx.tensor_name, ctx.step);
  if (absl::Status s =
          RandomKIndices(n, KeepCount(n, theta), out->seed, &out->indices, options_.pool);
      !s.ok()) {
    return s;
  }
  out->values.resize(out->indices.size());
  for (size_t i = 0; i < out->indices.size(); ++i) out->values[i] = input[out->indices[i]];
  return RoundToValueTypeChecked(out->value_type, absl::MakeSpan(out->values), ctx.tensor_name,
                                 out->indices);
}

absl::Status RandomKCompressor::CompressFrom(const Compressed& first, double theta,
                                             const CompressContext& ctx, Compressed* out) {
  if (first.dense || !first.implicit_indices || first.indices.size() != first.values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': randomk CompressFrom needs a randomk output (sparse, implicit indices, "
        "indices.size() == values.size())",
        ctx.tensor_name));
  }
  if (!(theta >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': randomk needs theta >= 1, got %g", ctx.tensor_name, theta));
  }
  const int64_t k = KeepCount(first.dense_size, theta);
  if (k > first.count()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': randomk CompressFrom at theta %g keeps %d elements but the first level has "
        "only %d (the second level must compress more)",
        ctx.tensor_name, theta, k, first.count()));
  }
  // The k smallest (priority, index) among first's entries: by nesting, the k smallest overall.
  scratch_.resize(first.indices.size());
  for (size_t j = 0; j < first.indices.size(); ++j) {
    scratch_[j] = {RandomKPriority(first.seed, first.indices[j]), first.indices[j]};
  }
  std::vector<int32_t> indices;
  std::vector<float> values;
  if (k > 0) {
    std::vector<std::pair<uint64_t, int32_t>> sorted = scratch_;
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end());
    const std::pair<uint64_t, int32_t> cut = sorted[k - 1];
    indices.reserve(static_cast<size_t>(k));
    values.reserve(static_cast<size_t>(k));
    for (size_t j = 0; j < scratch_.size(); ++j) {  // first.indices ascending: output ascending
      if (scratch_[j] <= cut) {
        indices.push_back(first.indices[j]);
        values.push_back(first.values[j]);
      }
    }
  }
  out->dense_size = first.dense_size;
  out->dense = false;
  out->value_type = first.value_type;
  out->implicit_indices = true;
  out->seed = first.seed;
  out->indices = std::move(indices);
  out->values = std::move(values);
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cpu

#include "kernels/cpu/check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"

namespace gravac::kernels::cpu {

absl::Status CheckSize(int64_t n, std::string_view tensor_name) {
  if (n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': %d elements do not fit int32 indices (at most %d)", tensor_name, n,
        kMaxElements));
  }
  return absl::OkStatus();
}

absl::Status NonFiniteError(std::string_view tensor_name, int64_t index, float value) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "tensor '%s': non-finite value %f at index %d (NaN or Inf in the gradient)", tensor_name,
      value, index));
}

absl::Status CheckInput(absl::Span<const float> input, std::string_view tensor_name,
                        ThreadPool* pool) {
  int64_t n = static_cast<int64_t>(input.size());
  if (absl::Status s = CheckSize(n, tensor_name); !s.ok()) return s;
  const float* data = input.data();
  // A float is non-finite exactly when its exponent bits are all ones.
  // A float is non-finite exactly when its exponent bits are all ones; test blocks with a
  // vectorisable integer OR-reduction and look for the index only in a bad block.
  auto first_bad = [data](int64_t begin, int64_t end) -> int64_t {
    const int64_t kBlock = 4096;
    const auto* bits = reinterpret_cast<const uint32_t*>(data);
    for (int64_t b = begin; b < end; b += kBlock) {
      int64_t e = std::min(end, b + kBlock);
      uint32_t any = 0;
      for (int64_t i = b; i < e; ++i) any |= ((bits[i] & 0x7f800000u) == 0x7f800000u);
      if (any) {
        for (int64_t i = b; i < e; ++i) {
          if (!std::isfinite(data[i])) return i;
        }
      }
    }
    return -1;
  };
  int64_t bad = -1;
  if (pool == nullptr) {
    bad = first_bad(0, n);
  } else {
    std::vector<int64_t> per_lane(pool->size(), -1);
    pool->ParallelFor(n, 1 << 18, [&](int lane, int64_t begin, int64_t end) {
      per_lane[lane] = first_bad(begin, end);
    });
    for (int64_t b : per_lane) {  // lanes hold chunks in order: the first hit is the lowest
      if (b >= 0) {
        bad = b;
        break;
      }
    }
  }
  if (bad >= 0) return NonFiniteError(tensor_name, bad, data[bad]);
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cpu

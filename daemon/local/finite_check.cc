#include "daemon/local/finite_check.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gravac::daemon {
namespace {

// A value is not finite when its magnitude bits (sign cleared) are at least the exponent mask.
// Each block of 1024 elements is reduced to its largest magnitude branch-free (the compiler
// vectorises the max); only a block whose maximum reaches the mask is searched.
template <typename Bits>
int64_t FirstAllOnes(const uint8_t* data, size_t count, Bits exponent) {
  constexpr size_t kBlock = 1024;
  const Bits magnitude = static_cast<Bits>(~Bits{0} >> 1);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    const uint8_t* block = data + start * sizeof(Bits);
    Bits largest = 0;
    for (size_t i = 0; i < n; ++i) {
      Bits v;
      std::memcpy(&v, block + i * sizeof(Bits), sizeof(Bits));
      v &= magnitude;
      largest = v > largest ? v : largest;
    }
    if (largest < exponent) continue;
    for (size_t i = 0; i < n; ++i) {
      Bits v;
      std::memcpy(&v, block + i * sizeof(Bits), sizeof(Bits));
      if ((v & magnitude) >= exponent) return static_cast<int64_t>(start + i);
    }
  }
  return -1;
}

}  // namespace

int64_t FirstNonFinite(collectives::DataType type, const uint8_t* data, size_t count) {
  switch (type) {
    case collectives::DataType::kFloat32:
      return FirstAllOnes<uint32_t>(data, count, 0x7f800000u);
    case collectives::DataType::kFloat64:
      return FirstAllOnes<uint64_t>(data, count, 0x7ff0000000000000ull);
    case collectives::DataType::kFloat16:
      return FirstAllOnes<uint16_t>(data, count, static_cast<uint16_t>(0x7c00));
    case collectives::DataType::kBFloat16:
      return FirstAllOnes<uint16_t>(data, count, static_cast<uint16_t>(0x7f80));
    default:
      return -1;
  }
}

absl::Status CheckFiniteAllreduce(absl::Span<const LocalInput> inputs, const uint8_t* sum,
                                  size_t sum_bytes) {
  if (inputs.empty() || inputs[0].spec->kind != CollectiveKind::kAllreduce) {
    return absl::OkStatus();
  }
  const collectives::DataType type = inputs[0].spec->dtype;
  const size_t elem = collectives::DataTypeSize(type);
  const int64_t at = FirstNonFinite(type, sum, sum_bytes / elem);
  if (at < 0) return absl::OkStatus();
  std::vector<int> ranks;
  for (const LocalInput& in : inputs) {
    if (FirstNonFinite(type, in.data, in.bytes / elem) >= 0) ranks.push_back(in.rank);
  }
  const std::string whose =
      ranks.empty() ? absl::StrFormat("the sum of ranks [%s] (it overflowed)",
                                      absl::StrJoin(inputs, ", ",
                                                    [](std::string* out, const LocalInput& in) {
                                                      absl::StrAppend(out, in.rank);
                                                    }))
                    : absl::StrFormat("the input of ranks [%s]", absl::StrJoin(ranks, ", "));
  return absl::InvalidArgumentError(
      absl::StrFormat("tensor '%s': non-finite value at element %d in %s (gravacd --check_finite)",
                      inputs[0].spec->name, at, whose));
}

}  // namespace gravac::daemon

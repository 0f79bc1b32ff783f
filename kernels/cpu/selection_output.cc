#include "kernels/cpu/selection_output.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/kth_largest.h"

namespace gravac::kernels::cpu {

absl::Status CheckCompressArgs(int64_t n, double theta, std::string_view tensor_name) {
  RETURN_IF_ERROR(CheckSize(n, tensor_name));
  if (!(theta >= 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': compression factor theta must be >= 1, got %f", tensor_name, theta));
  }
  return absl::OkStatus();
}

void PrepareSparseOutput(int64_t n, ValueType type, Compressed* out) {
  out->dense_size = n;
  out->dense = false;
  out->value_type = type;
  out->implicit_indices = false;
  out->seed = 0;
}

absl::Status FinishSparseOutput(std::string_view tensor_name, Compressed* out) {
  if (out->value_type == ValueType::kFloat32) return absl::OkStatus();
  return RoundToValueTypeChecked(out->value_type, absl::MakeSpan(out->values), tensor_name,
                                 out->indices);
}

absl::Status SelectTopKFromSparse(const Compressed& first, int64_t k, Compressed* out) {
  return SelectTopKFromSparse(ViewOf(first), k, out);
}

absl::Status SelectTopKFromSparse(const CompressedView& first, int64_t k, Compressed* out) {
  if (first.dense || first.indices.size() != first.values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "select top-k from sparse: input must be sparse with one index per value (dense=%d, "
        "%d indices, %d values)",
        first.dense, first.indices.size(), first.values.size()));
  }
  if (k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("select top-k from sparse: k must be >= 0, got %d", k));
  }
  const bool aliases = (!first.values.empty() && first.values.data() == out->values.data()) ||
                       (!first.indices.empty() && first.indices.data() == out->indices.data());
  if (aliases) {
    Compressed copy;
    copy.dense_size = first.dense_size;
    copy.value_type = first.value_type;
    copy.indices.assign(first.indices.begin(), first.indices.end());
    copy.values.assign(first.values.begin(), first.values.end());
    return SelectTopKFromSparse(ViewOf(copy), k, out);
  }
  const int64_t m = first.count();
  k = std::min(k, m);
  const int64_t dense_size = first.dense_size;
  const ValueType value_type = first.value_type;
  out->indices.resize(k);
  out->values.resize(k);
  PrepareSparseOutput(dense_size, value_type, out);
  if (k == m) {
    std::copy(first.indices.begin(), first.indices.end(), out->indices.begin());
    std::copy(first.values.begin(), first.values.end(), out->values.begin());
    return absl::OkStatus();
  }
  if (k == 0) return absl::OkStatus();
  std::vector<uint32_t> histogram, scratch;
  auto for_each = [&first, m](auto&& fn) {
    for (int64_t i = 0; i < m; ++i) fn(first.indices[i], first.values[i]);
  };
  internal::EmitTopKOf(for_each, k, out->indices.data(), out->values.data(), &histogram, &scratch);
  return absl::OkStatus();
}

absl::Status SelectFrom(const Compressed& first, double theta, const CompressContext& ctx,
                        Compressed* out) {
  return SelectFrom(ViewOf(first), theta, ctx, out);
}

absl::Status SelectFrom(const CompressedView& first, double theta, const CompressContext& ctx,
                        Compressed* out) {
  RETURN_IF_ERROR(CheckCompressArgs(first.dense_size, theta, ctx.tensor_name));
  return SelectTopKFromSparse(first, KeepCount(first.dense_size, theta), out);
}

}  // namespace gravac::kernels::cpu

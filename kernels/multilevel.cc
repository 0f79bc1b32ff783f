#include "kernels/multilevel.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::kernels {

double L2Norm(absl::Span<const float> values) {
  // Four independent accumulators let the loop vectorise without reassociation flags.
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  const size_t n = values.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t j = 0; j < 4; ++j) {
      const double x = values[i + j];
      acc[j] += x * x;
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(values[i]) * values[i];
  return std::sqrt((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

double L2Norm(const Compressed& c) { return L2Norm(absl::MakeConstSpan(c.values)); }

absl::Status CompressMultiLevel(Compressor& compressor, absl::Span<const float> p, double theta_min,
                                double theta_c, const CompressContext& ctx,
                                MultiLevelResult* result) {
  if (!(theta_min >= 1.0) || !(theta_c >= theta_min)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': multi-level compression needs 1 <= theta_min <= theta_c, got theta_min %g, "
        "theta_c %g",
        ctx.tensor_name, theta_min, theta_c));
  }
  RETURN_IF_ERROR(compressor.Compress(p, theta_min, ctx, &result->at_min));
  RETURN_IF_ERROR(compressor.CompressFrom(result->at_min, theta_c, ctx, &result->at_candidate));
  result->norm_min = L2Norm(result->at_min);
  result->norm_candidate = L2Norm(result->at_candidate);
  return absl::OkStatus();
}

}  // namespace gravac::kernels

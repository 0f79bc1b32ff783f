#include "daemon/engine/fusion_plan.h"

#include <tuple>
#include <utility>

namespace gravac::daemon::internal {

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool Compressible(const TensorSpec& s, const kernels::Compressor* c) {
  return c != nullptr && s.kind == CollectiveKind::kAllreduce &&
         s.dtype == collectives::DataType::kFloat32 && s.compress && s.process_set.empty();
}

bool SendsCompressed(const TensorSpec& spec, double theta, const PlanOptions& options) {
  if (!Compressible(spec, options.compressor) || !(theta > 1.0)) return false;
  const int p = options.world_nodes;
  if (p <= 1) return false;
  const int64_t n = Elements(spec.shape);
  double payload;
  if (options.compressor->is_dense()) {
    payload = 2.0 * n;
  } else {
    payload = static_cast<double>(kernels::SparseEncodedSizeBound(
        n, options.compressor->MaxCount(n, theta), options.value_type,
        options.compressor->name() == "randomk"));
  }
  return payload * (p - 1) < 2.0 * (p - 1) / p * n * 4.0;
}

std::vector<Group> PlanGroups(const std::vector<ReadyTensor>& ready, const PlanOptions& options) {
  using Key = std::tuple<int, int, int, bool, double, int64_t, int64_t, std::vector<int>>;
  std::vector<Group> groups;
  std::vector<std::pair<Key, size_t>> open;  // key -> index into groups
  std::vector<size_t> group_bytes;
  for (size_t i = 0; i < ready.size(); ++i) {
    const TensorSpec& s = ready[i].spec;
    if (s.kind != CollectiveKind::kAllreduce) {
      groups.push_back(
          {s.kind == CollectiveKind::kAllgather ? GroupMode::kAllgather : GroupMode::kBroadcast,
           1.0,
           {i}});
      group_bytes.push_back(0);
      continue;
    }
    const double theta = ready[i].decision.theta;
    const bool sparse = SendsCompressed(s, theta, options);
    const Key key{sparse ? 1 : 0, static_cast<int>(s.dtype), static_cast<int>(s.reduce_op),
                  s.compress,     sparse ? theta : 1.0,      ready[i].decision.epoch,
                  s.step,         s.process_set};
    const size_t bytes = Elements(s.shape) * collectives::DataTypeSize(s.dtype);
    size_t g = groups.size();
    for (const auto& [k, index] : open) {
      if (k == key && group_bytes[index] + bytes <= options.fusion_threshold_bytes) g = index;
    }
    if (g == groups.size()) {
      groups.push_back({sparse ? GroupMode::kSparseAllreduce : GroupMode::kDenseAllreduce,
                        sparse ? theta : 1.0,
                        {}});
      group_bytes.push_back(0);
      open.emplace_back(key, g);
    }
    groups[g].members.push_back(i);
    group_bytes[g] += bytes;
  }
  return groups;
}

}  // namespace gravac::daemon::internal

// The fusion planner: PlanGroups turns a cycle's ready tensors into the groups the Executor runs
// (fused allreduces, and one group per allgather or broadcast). It reads agreed values only, so
// every node plans the same groups in the same order.
//
// Dense vs sparse, per tensor, from agreed values only: a tensor is compressed when it is an fp32
// allreduce with compress = true, the job has a compressor, the step's θ > 1, and the compressed
// message is smaller than a dense ring's share: B·(P−1) < 2(P−1)/P·n·4, where B is the most bytes
// the wire format can take for k = KeepCount(n, θ) values of the job's value type
// (kernels::SparseEncodedSizeBound: header, values, and the smaller of int32 and varint-coded
// indices, none for randomk; about 5.5 bytes per element at θ = 10 with fp32 values, against
// 8 for fp32 + int32), or 2n for the fp16/bf16 casts.
//
// Fusion: allreduces with the same mode, dtype, reduce op, compress flag, θ (sparse), decision
// epoch, step and process set share a group while its members total at most fusion_threshold_bytes.
//
// Thread-safety: pure functions.
#ifndef GRAVAC_DAEMON_ENGINE_FUSION_PLAN_H_
#define GRAVAC_DAEMON_ENGINE_FUSION_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/engine/negotiation.h"
#include "daemon/engine/types.h"
#include "kernels/compressor.h"
#include "kernels/wire_format.h"

namespace gravac::daemon::internal {

enum class GroupMode { kDenseAllreduce, kSparseAllreduce, kAllgather, kBroadcast };

struct Group {
  GroupMode mode = GroupMode::kDenseAllreduce;
  double theta = 1.0;           // sparse: the θ the group is sent at
  std::vector<size_t> members;  // indices into the cycle's ready tensors, in order
};

struct PlanOptions {
  int world_nodes = 1;
  size_t fusion_threshold_bytes = 64 << 20;
  const kernels::Compressor* compressor = nullptr;               // nullptr: everything dense
  kernels::ValueType value_type = kernels::ValueType::kFloat32;  // of the sparse values
};

// The number of elements of a tensor of `shape` (1 for a scalar).
int64_t Elements(const std::vector<int64_t>& shape);

// True when `spec` goes through error feedback and compression at some θ: an fp32 allreduce with
// compress = true, with a compressor (a dense step of such a tensor still sends p = g + e).
// Tensors of a process set other than the whole job never are (they run dense).
bool Compressible(const TensorSpec& spec, const kernels::Compressor* compressor);

// True when `spec` at `theta` would travel compressed (see the header comment).
bool SendsCompressed(const TensorSpec& spec, double theta, const PlanOptions& options);

std::vector<Group> PlanGroups(const std::vector<ReadyTensor>& ready, const PlanOptions& options);

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_FUSION_PLAN_H_

// The pure parts of the daemon's local side: converting a worker's Request (worker.proto) into a
// TensorSpec, checking that the local workers' specs of one tensor agree, and combining their
// buffers into one NodeTensor (allreduce: sum; allgather: concatenation in local-rank order;
// broadcast: the root's data, zeros when the root is on another node).
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_LOCAL_LOCAL_REDUCE_H_
#define GRAVAC_DAEMON_LOCAL_LOCAL_REDUCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/engine/types.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon {

// The spec of a request from global rank `rank`. InvalidArgument (naming rank, tensor, field)
// for an unknown kind / dtype / op, a negative dimension or a byte count that does not match
// dtype and shape.
absl::StatusOr<TensorSpec> SpecFromRequest(const v1::Request& request, int rank);

// Checks a request's process set (Horovod's) in a job of `world_size` ranks, posted by global
// rank `rank`: its ranks ascending and distinct (a rank named twice is named), within the job,
// `rank` among them, a broadcast's root among them, no compression (GraVAC compresses the whole
// job's gradients only) and no join (it is the whole job's). InvalidArgument naming the rank,
// tensor and field. A set of every rank becomes the whole job's (spec->process_set cleared).
absl::Status CheckProcessSet(TensorSpec* spec, int rank, int world_size);

// Whether global rank `rank` runs `spec` (is in its process set, or the set is the whole job).
bool InProcessSet(const TensorSpec& spec, int rank);

// Bytes of a tensor of `spec` (allgather: of one rank's block).
uint64_t TensorBytes(const TensorSpec& spec);

// One local worker's contribution to a tensor.
struct LocalInput {
  int rank = 0;  // global rank
  const TensorSpec* spec = nullptr;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// FailedPrecondition when the local workers disagree on a field that must agree across ranks
// (daemon/engine/spec_agreement.h: the same table and message as the cross-node check, e.g.
// "tensor 'w': dtype fp16 on ranks 1 differs from fp32 on ranks 0"). `inputs` is in local-rank
// order.
absl::Status CheckLocalAgreement(absl::Span<const LocalInput> inputs);

// Combines agreeing inputs (in local-rank order) into the NodeTensor handed to the engine.
// `storage` (e.g. a result buffer of an earlier step) becomes the tensor's data buffer, so a
// steady-state step reuses memory instead of faulting in fresh pages.
NodeTensor CombineLocal(absl::Span<const LocalInput> inputs, int64_t posted_at_ns,
                        std::vector<uint8_t> storage = {});

// Keeps large result buffers of finished tensors for reuse by later ones of the same size
// (bounded: a few buffers per size, kMaxPooledBytes in all). A buffer comes back with the size
// and the stale contents it was given with. Not thread-safe.
class BufferPool {
 public:
  static constexpr size_t kMinPooledBytes = 64 << 10;
  static constexpr size_t kMaxPooledBytes = size_t{512} << 20;
  static constexpr size_t kMaxPerSize = 4;
  // A buffer whose capacity is at least `bytes` (empty when none is pooled).
  std::vector<uint8_t> Take(size_t bytes);
  void Give(std::vector<uint8_t> buffer);
  size_t pooled_bytes() const { return pooled_bytes_; }

 private:
  std::map<size_t, std::vector<std::vector<uint8_t>>> by_capacity_;
  size_t pooled_bytes_ = 0;
};

// Horovod's join: whether ranks that joined can contribute zeros to a tensor others post. ""
// when they can (an allreduce, posted before by every joined rank; `never_posted` empty), else
// the error naming the tensor and the ranks. `joined` empty: "".
std::string JoinedRanksAnswer(const TensorSpec& spec, absl::Span<const int> joined,
                              absl::Span<const int> never_posted);

std::string ShapeString(absl::Span<const int64_t> shape);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_LOCAL_LOCAL_REDUCE_H_

// The types that cross the daemon's seams: the local side (daemon/local/, which gathers the
// workers' requests and reduces them on the node) hands NodeTensors to the engine
// (daemon/engine/, which negotiates across nodes, compresses and exchanges); the engine reads
// decisions from a DecisionSource and reports per-step statistics to a StatsSink (both
// implemented by daemon/control/ControllerClient, and by fakes in tests).
//
// Thread-safety: plain values; DecisionSource and StatsSink implementations are thread-safe.
#ifndef GRAVAC_DAEMON_ENGINE_TYPES_H_
#define GRAVAC_DAEMON_ENGINE_TYPES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/job_types.h"
#include "core/memory_type.h"
#include "daemon/engine/device_data.h"
#include "daemon/collectives/reduce.h"

namespace gravac::daemon {

// kJoin is Horovod's join: a rank that ran out of data posts it and from then on contributes
// zeros to the allreduces the other ranks still post (TensorSpec: int32 scalar; root_rank carries
// the node's last joined global rank, the agreed result is the job's last joined rank).
enum class CollectiveKind : uint8_t {
  kAllreduce = 1,
  kAllgather = 2,
  kBroadcast = 3,
  kJoin = 4,
};

// What a worker asked for. The ranks are matched by name; the fields that must agree across them,
// and the collectives each applies to (reduce_op and compress: allreduce only; for allgather only
// shape[1..]), are the table of daemon/engine/spec_agreement.h, which names the first differing
// field.
struct TensorSpec {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  collectives::DataType dtype = collectives::DataType::kFloat32;
  std::vector<int64_t> shape;  // empty = scalar (one element)
  collectives::ReduceOp reduce_op = collectives::ReduceOp::kSum;  // allreduce only
  int root_rank = 0;       // broadcast only: a global rank
  bool compress = false;   // allreduce of fp32 gradients that may be compressed (GraVAC)
  int64_t step = -1;       // training step the tensor belongs to; -1 = not part of a step
  int64_t samples = 0;     // samples this rank processed in `step` (for throughput); 0 unknown
  // Where the callers' tensors live; every rank must agree (a mix of host and device tensors for
  // one name is refused). The data gravacd reduces is in host memory either way today; the
  // engine compresses a kDevice tensor on the GPU (executor.h).
  MemoryType memory = MemoryType::kHost;
  // Horovod's process set: the global ranks that run this collective, ascending and distinct
  // (empty = every rank of the job). Only the nodes holding them list the tensor, and it runs
  // on the communicator of those nodes; an average divides by the set's size.
  std::vector<int> process_set;
};

// Asked, while every local rank of a node has joined, whether they can contribute zeros to a
// tensor another node posted: "" when they can (an allreduce every one of them posted before
// joining), else the error naming the joined rank(s) and the tensor.
using JoinCheck = std::function<std::string(const TensorSpec&)>;

// One tensor of this node, after the local side has combined its local workers' requests.
struct NodeTensor {
  TensorSpec spec;
  // allreduce: the SUM over the node's local workers (the engine averages by the world size);
  // allgather: the local workers' blocks concatenated in local-rank order;
  // broadcast: the root's data on the root's node, a buffer of the same size elsewhere.
  std::vector<uint8_t> data;
  // allgather: first dimension of each local worker's block, in local-rank order.
  std::vector<int64_t> first_dims;
  int64_t samples = 0;  // sum of the local workers' spec.samples
  // spec.memory kDevice: the CUDA device of the workers' buffers (the first local device post's;
  // -1 when unknown, e.g. staged by the client). The engine compresses the tensor with the
  // compression backend of that device (executor.h).
  int device = -1;
  // Set when the local side reduced the node's workers in device memory (allreduce of fp32 device
  // buffers): the node's sum there, and `data` is then empty (the engine copies the sum to host
  // memory only for a path that needs it there). Null: the data is in `data`, in host memory.
  std::shared_ptr<const DeviceData> device_data;
  // When the first local worker posted it (for step time and stall reports).
  int64_t posted_at_ns = 0;
  // Not OK when the node cannot run the tensor, e.g. its local workers disagree on it
  // (FailedPrecondition). The engine then fails the tensor on every node with this message, so
  // the other nodes' ranks get the error too instead of waiting; data is not used.
  absl::Status local_status;
  // kJoin only: how the node's joined ranks answer for tensors other nodes post meanwhile.
  JoinCheck join_check;
};

struct TensorResult {
  absl::Status status;         // on error, the message names the rank(s), tensor and field
  std::vector<uint8_t> data;   // allreduce/broadcast: same size as the input; allgather: all
  // Set when the engine's device step left the result in device memory (an allreduce whose
  // node's workers are on the device collectives' CUDA device, executor.h "Device step"): the
  // result there, and `data` is then empty until ResultHostData copies it. Whoever needs host
  // bytes goes through ResultHostData; the local side writes it to its workers' buffers of that
  // device in place (ipc::DeviceAccess::WriteFromDevice). Null: the result is in `data`.
  std::shared_ptr<const DeviceData> device_data;
  std::vector<int64_t> first_dims;  // allgather: first dimension per global rank
  double theta = 1.0;          // CF the tensor was sent with; 1 = uncompressed
  std::string collective;      // "dense_allreduce", "sparse_allgather", "allgather", "broadcast"
  int64_t decision_epoch = 0;  // decision epoch in force for the tensor's step
};

// The result's size in bytes, wherever it lies.
inline size_t ResultBytes(const TensorResult& r) {
  return r.device_data != nullptr ? r.device_data->bytes() : r.data.size();
}

// Makes `r.data` hold the result in host memory: as it is for a host result; for a result in
// device memory, one copy of device_data into `data` (the first call; later ones copy nothing,
// device_data stays set). On the copy's error `data` is left empty and the error returned as is
// (the caller names rank, tensor and field).
inline absl::Status ResultHostData(TensorResult& r) {
  if (r.device_data == nullptr || r.data.size() == r.device_data->bytes()) {
    return absl::OkStatus();
  }
  r.data.resize(r.device_data->bytes());
  absl::Status s = r.device_data->CopyToHost(r.data.data());
  if (!s.ok()) r.data.clear();
  return s;
}

// Called exactly once per NodeTensor, from an engine thread; must not block for long.
using DoneCallback = std::function<void(TensorResult)>;

// The control plane's shared types live in core/ (the controller uses them too).
using ::gravac::InitialDecision;
using ::gravac::JobConfig;
using ::gravac::JobDecision;
using ::gravac::NodeStepStats;

// Where the ranks are: node n holds global ranks [first_rank, first_rank + local_count).
struct NodeLayout {
  int first_rank = 0;
  int local_count = 0;
};

// The nodes holding ranks of `spec`'s process set (every node when it is the whole job), in
// node order.
std::vector<int> ProcessSetNodes(const TensorSpec& spec, const std::vector<NodeLayout>& layout);
// The number of ranks `spec` runs on: its process set's size, or the job's.
int ProcessSetSize(const TensorSpec& spec, const std::vector<NodeLayout>& layout);

class DecisionSource {
 public:
  virtual ~DecisionSource() = default;
  // The newest decision this node holds; epoch 0 (built from JobConfig) before any arrived.
  // Non-blocking.
  virtual JobDecision Newest() const = 0;
};

class StatsSink {
 public:
  virtual ~StatsSink() = default;
  // Non-blocking hand-off; delivery is asynchronous and best effort (never on the step's path).
  virtual void Report(const NodeStepStats& stats) = 0;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_TYPES_H_

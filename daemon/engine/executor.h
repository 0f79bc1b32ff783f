// Executor: runs one planned group (fusion_plan.h) over the Communicator: dense ring allreduce,
// compressed exchange with error feedback (sparse allgather of each node's compressed tensors),
// allgather and broadcast. The residuals live in a ResidualStore, the per-step statistics in a
// StepStatsAccumulator (step_stats.h, which also says what they count), and each group's line goes
// to the StepLog (step_log.h).
//
// A dense step of a compressible tensor (fusion_plan.h) sends p = g + e and clears e, and still
// measures N_min and N_c (the policy needs them to leave dense again).
//
// Overlap (sparse groups whose payload is at least kOverlapMinBytes): only what the message needs
// runs before the send (compensation, the sent level, encoding); the allgather then runs on a
// helper thread (BackgroundCall; the UCX worker is in serialized mode) while the engine thread
// commits the residuals, selects the candidate level and computes the norms for the statistics,
// zeroes the result buffers and, on node ranks 0 and 1, adds its own block (the first two
// additions into a zero sum commute exactly, so every node's sum stays bit-identical; the other
// blocks are added in node order after the exchange). In the step log, prepare_ms covers the work
// before the send, exchange_ms the collective itself, and finish_ms what follows it (the overlapped
// work is in neither when it ends before the exchange does).
//
// Error feedback and compression run on one of two paths, fixed per job:
//  - topk with fp32 values: kernels' CompressionBackend + TopKStep (backend_compression.h), the
//    backend chosen by the tensor's memory type (host: the CPU kernels, bit for bit the other
//    path; device: the CUDA kernels, residual and p in device memory, when gravac is built with
//    CUDA and the tensor's device can be used). On the CPU backend the levels and norms are
//    taken as on the other path (a candidate level that is not sent from θ_min's host copy,
//    Compressor::CompressFrom; norms in kernels::L2Norm's order). On a device backend both
//    levels are selected there (θ_c's straight from p) and ‖g‖ and both levels' norms come from
//    its SumSquares (LevelsOnDevice): only the sent message is copied to the host (p on a dense
//    step), for the wire. A node's sum that the local side left in device memory
//    (NodeTensor::device_data) is compensated there in place; every other path (the CPU
//    backend, the CPU compressor path, a dense step's fallback) copies it to `data` first
//    (HostData). The exchanges and the results are in host memory.
//  - every other compressor (randomk, dgc, redsync, fp16, bf16, topk with fp16 / bf16 values):
//    the CPU compressor with a kernels::cpu::ErrorFeedback per tensor (ResidualStore), host
//    memory only: the backends implement exact top-k with fp32 values and nothing else.
//
// A step allocates nothing for the compressed path once its buffers exist: on the CPU compressor
// path p = g + e lives in the residual's scratch buffer (kernels::cpu::ErrorFeedback::
// CompensateToScratch, which also yields ‖g‖ from the same pass), on the backend path in the
// TopKStep's; the sent message becomes the residual by a swap, and a sparse result is summed in
// the tensor's own input buffer, which is then handed back as the result (an average divides it
// with the vectorised kernels::cpu::DivideAll).
//
// bytes_sent counts this node's data-plane payload (ring allreduce: 2(P−1)/P of the buffer; ring
// allgather: every block but the right neighbour's).
//
// Thread-safety: not thread-safe; owned by the engine thread. Run blocks in the collectives.
#ifndef GRAVAC_DAEMON_ENGINE_EXECUTOR_H_
#define GRAVAC_DAEMON_ENGINE_EXECUTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/background_call.h"
#include "core/logging.h"
#include "daemon/collectives/communicator.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/backend_compression.h"
#include "daemon/engine/fusion_plan.h"
#include "daemon/engine/negotiation.h"
#include "daemon/engine/residual_store.h"
#include "daemon/engine/step_log.h"
#include "daemon/engine/step_stats.h"
#include "daemon/engine/timeline.h"
#include "daemon/engine/types.h"
#include "kernels/compressor.h"
#include "kernels/cpu/error_feedback.h"
#include "kernels/multilevel.h"

namespace gravac::daemon::internal {

// One ready tensor with this node's data.
struct WorkItem {
  ReadyTensor ready;
  NodeTensor* tensor = nullptr;  // this node's, owned by the engine
  int64_t start_ns = 0;          // when the tensor's first worker posted it on this node
};

struct ExecutorOptions {
  int node_rank = 0;
  std::vector<NodeLayout> layout;
  JobConfig job;
  std::string step_log_path;
  Logger* log = nullptr;
  DaemonMetrics* metrics = nullptr;  // collective latencies and sent bytes; nullptr = none
  kernels::ValueType value_type = kernels::ValueType::kFloat32;  // the compressor's sparse values
  Timeline* timeline = nullptr;  // each group's phases when enabled; nullptr = none
  // Run topk with fp32 values on kernels' CompressionBackend (backend_compression.h); false
  // keeps the CPU compressor path for it too (the two give the same results; tests compare them).
  bool compression_backend = true;
  // Makes the CUDA devices' compression backends; null: kernels::MakeCompressionBackend (tests
  // pass fakes).
  DeviceBackendFactory device_backends = nullptr;
};

class Executor {
 public:
  // compressor may be null (job compressor "none"); comm, stats must outlive the Executor.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(
      ExecutorOptions options, collectives::Communicator* comm,
      std::unique_ptr<kernels::Compressor> compressor, StatsSink* stats);
  ~Executor();

  const kernels::Compressor* compressor() const { return compressor_.get(); }
  kernels::ValueType value_type() const { return options_.value_type; }

  // Runs `group`; fills (*results)[i] for each member i of the group (results sized like
  // items). Per-tensor failures (e.g. a non-finite gradient on some node) go into the results;
  // the returned status is not OK only when the communicator failed (fatal for the engine).
  absl::Status Run(const Group& group, std::vector<WorkItem>& items,
                   std::vector<TensorResult>* results);

  // Reports every step not reported yet (at shutdown).
  void Flush() { steps_.Flush(); }

  // The residual of a tensor (tests); empty when none.
  std::vector<float> Residual(const std::string& name) const {
    return backend_ != nullptr ? backend_->Residual(name) : residuals_.Copy(name);
  }
  // The compression backend holding a tensor's residual ("cpu", "cuda"); "" when the CPU
  // compressor path holds it, or nothing does.
  std::string_view ResidualBackend(const std::string& name) const {
    return backend_ != nullptr ? backend_->BackendOf(name) : std::string_view();
  }

 private:
  using StepStats = StepStatsAccumulator::Step;

  Executor(ExecutorOptions options, collectives::Communicator* comm,
           std::unique_ptr<kernels::Compressor> compressor, StatsSink* stats, StepLog step_log);

  // Run on comm_ (the group's communicator).
  absl::Status RunOnSet(const Group& group, std::vector<WorkItem>& items,
                        std::vector<TensorResult>* results);
  // The communicator of `spec`'s process set: the job's, or a Subset of the nodes holding the
  // set's ranks (made on first use, kept).
  absl::StatusOr<collectives::Communicator*> CommFor(const TensorSpec& spec);
  absl::Status RunDense(const Group& group, std::vector<WorkItem>& items,
                        std::vector<TensorResult>* results);
  absl::Status RunSparse(const Group& group, std::vector<WorkItem>& items,
                         std::vector<TensorResult>* results);
  absl::Status RunAllgather(WorkItem& item, TensorResult* result);
  absl::Status RunBroadcast(WorkItem& item, TensorResult* result);

  // p = g + e for a compressible tensor, and the norms of the step's statistics. On error the
  // residual is unchanged. On the CPU compressor path p is the residual's scratch buffer
  // (ErrorFeedback::CompensateToScratch), on the backend path the TopKStep's (p stays empty):
  // valid until the tensor's residual is committed or cleared.
  using Level = BackendCompression::Level;
  struct Compensated {
    absl::Span<const float> p;
    double grad_norm = 0.0;  // ‖g‖
    // The tensor is on a device backend: both levels are selected there and their norms taken
    // there (LevelsOnDevice); `levels` holds host copies of the sent message only.
    bool on_device = false;
    kernels::MultiLevelResult levels;
  };
  absl::Status Compensate(const WorkItem& item, Compensated* c);
  // The tensor's data in host memory (`data`): copied there from its device sum
  // (NodeTensor::device_data) for a path that needs it, once; a no-op for host data.
  absl::Status HostData(const WorkItem& item);
  // Bytes of the node's data of an allreduce, wherever it lies.
  static size_t Bytes(const WorkItem& item);

  // The steps of either path. CompensateP: p = g + e and ‖g‖. Select: the message of p at θ into
  // *out (on the backend path in `level`'s message there). Commit: e = p - sent (`level` on the
  // backend path). ClearResidual: e = 0. CopyP: p into `bytes` of host memory.
  absl::Status CompensateP(const WorkItem& item, Compensated* c);
  absl::Status Select(const WorkItem& item, const Compensated& c, Level level, double theta,
                      kernels::Compressed* out);
  absl::Status Commit(const WorkItem& item, const Compensated& c, const kernels::Compressed& sent,
                      Level level);
  absl::Status ClearResidual(const WorkItem& item, const Compensated& c);
  absl::Status CopyP(const WorkItem& item, const Compensated& c, void* out, size_t bytes);
  // The candidate's level at θ_c from θ_min's (multi-level compression) and both norms.
  absl::Status CandidateFromMin(const WorkItem& item, Compensated* c);
  // A tensor on a device backend: selects the levels asked for there (θ_min's; θ_c's straight
  // from p) without a host copy, then takes both levels' norms there.
  absl::Status LevelsOnDevice(const WorkItem& item, Compensated* c, bool select_min,
                              bool select_candidate);

  // One member of a sparse group: its compensation, the level it sends and, while that message is
  // on the wire, what is left (the residual commit, the candidate level, the norms).
  enum class PendingLevel { kNone, kCandidate, kMin };  // computed after the send starts
  struct SparseMember {
    Compensated c;
    kernels::Compressed other;  // sent at a θ that is neither θ_min nor θ_c
    const kernels::Compressed* sent = nullptr;
    Level sent_level = Level::kMin;  // where the sent message lies on the backend path
    PendingLevel pending = PendingLevel::kNone;
    absl::Status status;
  };
  // p = g + e and the level the group sends at `theta` (with the levels that must precede it).
  absl::Status PrepareSent(const WorkItem& item, double theta, SparseMember* m);
  // Commits the sent message to the residual, computes the remaining level and the norms.
  absl::Status FinishSent(const WorkItem& item, SparseMember* m);
  StepStats* StatsFor(const WorkItem& item);
  void AddNorms(const WorkItem& item, const Compensated& c);
  void LogGroup(const Group& group, const std::vector<WorkItem>& items, double theta,
                const char* collective);
  // The group's operation and phases on each member's timeline track, and the θ and decision
  // epoch in force on the job's track.
  void TraceGroup(const Group& group, const std::vector<WorkItem>& items, double theta,
                  const char* collective, int64_t end_ns);
  void MarkExchange(bool start);
  int world_size() const;

  ExecutorOptions options_;
  collectives::Communicator* comm_;  // of the group being run
  collectives::Communicator* const job_comm_;
  std::map<std::vector<int>, std::unique_ptr<collectives::Communicator>> subsets_;  // by nodes
  int set_size_ = 0;             // ranks of the running group's process set; 0 = the job's
  std::vector<int> set_nodes_;   // nodes of the running group's process set, in node order
  std::unique_ptr<kernels::Compressor> compressor_;
  StepStatsAccumulator steps_;
  StepLog step_log_;
  GroupTiming timing_;  // of the group being run, for the step log
  ResidualStore residuals_;                      // the CPU compressor path's
  std::unique_ptr<BackendCompression> backend_;  // the backend path's; null when not used
  // Scratch reused by every group (buffers kept between steps, so a step allocates nothing).
  Compensated compensated_;
  std::vector<uint8_t> encoded_;
  std::vector<SparseMember> members_;
  std::vector<uint8_t> payload_, recv_;
  std::vector<size_t> sizes_;
  // Sparse payloads at least this large run their allgather on exchange_ while this thread
  // finishes the members; smaller ones run inline (a thread handoff would cost more than it hides).
  static constexpr size_t kOverlapMinBytes = 64 << 10;
  BackgroundCall exchange_;  // last member: joined before the buffers above are destroyed
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_EXECUTOR_H_

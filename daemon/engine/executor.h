// Executor: runs one planned group (fusion_plan.h) over the Communicator (or the job's device
// collectives, "Device step" below): dense ring allreduce, compressed exchange with error
// feedback (sparse allgather of each node's compressed tensors), allgather and broadcast. The
// residuals live in a ResidualStore, the per-step statistics in a
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
//    Compressor::CompressFrom; norms in kernels::L2Norm's order), but a θ_min level that is not
//    sent (θ_c was) is not copied out of the backend: its norm is taken in place (Norm). On a
//    device backend both
//    levels are selected there (θ_c's straight from p) and ‖g‖ and both levels' norms come from
//    its SumSquares (LevelsOnDevice): only the sent message is copied to the host (p on a dense
//    step), for the wire. A node's sum that the local side left in device memory
//    (NodeTensor::device_data) is compensated there in place; every other path (the CPU
//    backend, the CPU compressor path, a dense step's fallback) copies it to `data` first
//    (HostData). The exchanges and the results are in host memory (but see "Device step").
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
// Device step (executor_device.cc; issue 18 item 3). When the job's collectives are in device
// memory (ExecutorOptions::device_collectives: gravacd's nccl ones), a dense or sparse group runs
// over them instead of the Communicator, its data in device memory of the collectives' CUDA
// device, on that device's compression backend (BackendCompression's, or the Executor's own when
// the job has no backend path):
//  - dense: each member's p (or g) packed into one device buffer (CopyWithin from the backend's
//    p or the node's device sum; through host memory only for what lies elsewhere: the CPU
//    compressor path's p, another device, a host sum), AllreduceSum, Wait, an average divided
//    there (CompressionBackend::DivideAll, kernels::cpu::DivideAll's bits);
//  - sparse (topk with fp32 values): the sent level selected on the device and left there; the
//    node's block in device memory (one int64 header per member, k >= 0 or -1 - L for an error
//    of L bytes, then per member k int32 indices and k fp32 values, or the error padded to 8);
//    AgreeSizes, Allgatherv, the residual commit, candidate level and norms (FinishSent) while
//    the gather runs, Wait; every node's headers copied to the host (one copy per node), each
//    member's sum built on the device (Zero, ScatterAdd of every node's message in node order,
//    DivideAll for an average). Errors reach every node in the error
//    blocks and read as on the host path (own block first on node ranks 0 and 1, then node order);
//    a block that does not parse fails its tensors ("truncated or malformed device exchange
//    block"). The sums are bit for bit the host path's: node order is the host path's order (its
//    own-block-first rule only swaps the first two additions into a zero sum, which commute
//    exactly), given collectives whose allreduce sums as the Communicator's ring does (the host
//    ones do; NCCL's order is its own).
//  - results (TakeResult): when the node's workers of the tensor are on the collectives' device
//    (NodeTensor::device), each result is built in a buffer of its own from a per-device pool
//    (device_results.h: a sparse sum straight in it; a dense one copied within the device out of
//    the fused buffer, which the next group reuses), the backend synchronised once per group,
//    and handed back in device memory
//    (TensorResult::device_data, `data` empty): the local side writes it into the workers'
//    mapped buffers device to device, and whatever needs host bytes copies it once
//    (ResultHostData, types.h). Otherwise (device unknown, e.g. staged by the client, or another
//    one) it is copied to the host once, into `data`. A failed synchronisation fails the group's
//    device results, naming tensor and device.
// Which groups: decided from what every node agrees on (the specs and the job's compressor), so
// every node takes the same path: dense and sparse fp32 allreduce groups of device tensors
// (spec.memory kDevice) outside process sets, sparse ones only on the backend path. Every other
// group (a process set's, a group with a host tensor, another type or compressor, allgather,
// broadcast) runs on the host path, said once per reason in the log. Where a node's data lies
// only decides how it is staged. bytes_sent and the metrics count the device blocks by the rules
// below; a failure of the collectives is returned (fatal for the engine), as the Communicator's.
// The backend's queued copies are synchronised before each collective starts (the collectives
// run on a stream of their own), and the results are read only after Wait.
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
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/background_call.h"
#include "core/logging.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/backend_compression.h"
#include "daemon/engine/device_results.h"
#include "daemon/engine/fusion_plan.h"
#include "daemon/engine/negotiation.h"
#include "daemon/engine/residual_store.h"
#include "daemon/engine/step_log.h"
#include "daemon/engine/step_stats.h"
#include "daemon/engine/timeline.h"
#include "daemon/engine/types.h"
#include "kernels/backend.h"
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
  // The job's collectives in device memory (daemon/collectives/device_collectives.h: gravacd's
  // nccl ones) for the device step (executor_device.cc). Null, or collectives whose
  // memory_type() is kHost: every group runs over the Communicator, as before. Not owned; must
  // outlive the Executor.
  collectives::DeviceCollectives* device_collectives = nullptr;
  // Bound of the device collectives' AgreeSizes and Wait.
  absl::Duration device_timeout = absl::Seconds(30);
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
  // A dense step's staging, shared by RunDense (host buffer) and RunDenseOnDevice (device
  // buffer): the group's members in order, each Bytes(item) at the next offset of the group's
  // buffer. A compressed tensor sends p = g + e (stage_p writes p at `offset`), its residual
  // cleared and its norms added; on an error there (non-finite input) it sends g as is, the
  // residual kept. An uncompressed tensor sends g (stage_g writes g at `offset` and returns the
  // member's status: on an error its bytes must be zeros and the tensor fails). Counts each
  // member's bytes_sent. Returns each member's staged status, in member order.
  std::vector<absl::Status> StageDense(
      const Group& group, std::vector<WorkItem>& items,
      absl::FunctionRef<absl::Status(const WorkItem&, const Compensated&, size_t offset)> stage_p,
      absl::FunctionRef<absl::Status(const WorkItem&, size_t offset)> stage_g);
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
    // What Commit reads on the compressor path; on the backend path it only marks that a
    // message was sent (Commit reads the backend's level `sent_level`).
    const kernels::Compressed* sent = nullptr;
    Level sent_level = Level::kMin;  // where the sent message lies on the backend path
    // The sent message in host memory, which the encoding reads: a host copy (`sent`), or the
    // CPU backend's message buffers (no copy). Unset for a message left in device memory.
    kernels::CompressedView wire;
    PendingLevel pending = PendingLevel::kNone;
    // The device step: the sent message is `sent_level`'s on the backend, in device memory (no
    // host copy; `sent` then only stands for it in Commit, which reads the backend's).
    bool sent_on_device = false;
    absl::Status status;
  };
  // p = g + e and the level the group sends at `theta` (with the levels that must precede it).
  absl::Status PrepareSent(const WorkItem& item, double theta, SparseMember* m);
  // PrepareSent after the compensation: the levels and the sent message in host memory (host
  // copies, or the CPU backend's own buffers).
  absl::Status SelectSent(const WorkItem& item, double theta, SparseMember* m);
  // The message sent is `copy` (host memory), the backend's `level` on the backend path.
  static absl::Status SentFrom(const kernels::Compressed* copy, Level level, SparseMember* m);
  // The message sent is the CPU backend's `level`, encoded from its buffers.
  absl::Status SentFromBackend(const WorkItem& item, Level level, SparseMember* m);
  // Commits the sent message to the residual, computes the remaining level and the norms.
  absl::Status FinishSent(const WorkItem& item, SparseMember* m);

  // The device step (executor_device.cc): the group's exchange over options_.device_collectives,
  // the data in device memory of the collectives' device. RunsOnDevice decides from what every
  // node agrees on (the specs, the job's compressor), so all nodes take the same path; a group
  // it cannot carry runs on the host path (said once per reason in the log).
  bool RunsOnDevice(const Group& group, const std::vector<WorkItem>& items);
  absl::Status RunDenseOnDevice(const Group& group, std::vector<WorkItem>& items,
                                std::vector<TensorResult>* results);
  absl::Status RunSparseOnDevice(const Group& group, std::vector<WorkItem>& items,
                                 std::vector<TensorResult>* results);
  // PrepareSent, the sent level left on the device backend when the tensor's state is on the
  // device step's backend; otherwise PrepareSent's host copies.
  absl::Status PrepareSentOnDevice(const WorkItem& item, double theta, SparseMember* m);
  // The compression backend of the collectives' device (BackendCompression's when there is
  // one, else one of the Executor's own); kFailedPrecondition when that device has none.
  absl::StatusOr<kernels::CompressionBackend*> DeviceStepBackend();
  // `slot` grown to at least `bytes` of `dev`'s memory; its data.
  absl::StatusOr<uint8_t*> DeviceScratch(kernels::CompressionBackend* dev,
                                         std::unique_ptr<kernels::BackendMemory>* slot,
                                         size_t bytes);
  // g (StageG) or p (StageP) of `item` into `dst`, Bytes(item) bytes of `dev`'s memory: copied
  // within the device when it lies there, else through host memory.
  absl::Status StageG(const WorkItem& item, kernels::CompressionBackend* dev, uint8_t* dst);
  absl::Status StageP(const WorkItem& item, const Compensated& c, kernels::CompressionBackend* dev,
                      uint8_t* dst);
  // The device step's result of `item` (`bytes` bytes of dev's memory that `build(out)` writes
  // with dev's operations) into *r: built in a buffer of its own in device memory and handed so
  // (r->device_data, from DeviceResultsOn; *queued set: build is queued on dev's stream and the
  // caller synchronises dev before the results go) when the node's workers of the tensor are on
  // dev's device (NodeTensor::device); else built at `scratch()` (dev's memory, at least `bytes`;
  // asked for only then) and copied once to host memory: into *host, which then becomes r->data.
  absl::Status TakeResult(const WorkItem& item, kernels::CompressionBackend* dev, size_t bytes,
                          absl::FunctionRef<absl::StatusOr<uint8_t*>()> scratch,
                          absl::FunctionRef<absl::Status(void*)> build, std::vector<uint8_t>* host,
                          TensorResult* r, bool* queued);
  // A result whose sum on dev failed with `s`: no data, its status naming tensor and device.
  static void FailSum(const WorkItem& item, const kernels::CompressionBackend& dev,
                      const absl::Status& s, TensorResult* r);
  // After the results of a group were taken: synchronises dev when a result was queued, and on
  // its error fails each result handed in device memory, naming the tensor and device.
  void FinishResults(const Group& group, const std::vector<WorkItem>& items,
                     kernels::CompressionBackend* dev, bool queued,
                     std::vector<TensorResult>* results);
  // The pool of device_results_ for dev's device, made on first use over a backend of that
  // device (as own_device_backend_); null when none can be made (results then go to the host,
  // said once in the log).
  DeviceResults* DeviceResultsOn(kernels::CompressionBackend* dev);
  // Host bytes to `dst` in `dev`'s memory.
  absl::Status StageHost(kernels::CompressionBackend* dev, uint8_t* dst, const void* host,
                         size_t bytes);
  void SayHostPath(const std::string& why);
  // Logs, once per Executor (per job), that the device step ran a group: the first group whose
  // exchange over the device collectives completed (`collective`: its kind), naming the
  // collectives and their CUDA device. scripts/gpu_check.sh greps for "device step: ".
  void SayDeviceStep(std::string_view collective);

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
  std::vector<SparseMember> members_;
  std::vector<uint8_t> payload_, recv_;
  std::vector<size_t> sizes_;
  // Sparse payloads at least this large run their allgather on exchange_ while this thread
  // finishes the members; smaller ones run inline (a thread handoff would cost more than it hides).
  static constexpr size_t kOverlapMinBytes = 64 << 10;
  // The device step's: its backend when the Executor owns it (no BackendCompression), its
  // buffers in that device's memory (grown, kept between steps), host scratch, the reasons said.
  std::unique_ptr<kernels::CompressionBackend> own_device_backend_;
  std::unique_ptr<kernels::BackendMemory> device_buffer_, device_send_, device_recv_;
  std::vector<int64_t> device_headers_;
  std::vector<uint8_t> host_scratch_;  // p of a tensor staged through host memory (StageP)
  std::unique_ptr<DeviceResults> device_results_;  // the device step's results, handed back
  std::set<std::string> said_host_path_;
  bool said_device_step_ = false;
  BackgroundCall exchange_;  // last member: joined before the buffers above are destroyed
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_EXECUTOR_H_

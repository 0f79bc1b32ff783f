// Engine: the daemon's cross-node engine. One background thread per daemon negotiates which
// tensors every node holds (metadata agreement, the decision epoch to apply, a response cache for
// the steady state), fuses small allreduces, compresses with error feedback at the agreed θ,
// exchanges over the Communicator between the daemons (rank = node rank) and completes the
// tensors through their DoneCallbacks. Horovod's Controller / ResponseCache / FusionBuffer /
// StallInspector are the concepts; there is no global state.
//
//   EngineOptions options{.node_rank = join.node_rank, .layout = join.layout, .job = join.job};
//   ASSIGN_OR_RETURN(auto engine, Engine::Start(options, std::move(comm), client, client));
//   engine->Enqueue(std::move(node_tensor), [](TensorResult r) { ... });
//   RETURN_IF_ERROR(engine->Shutdown(absl::Seconds(10)));
//
// Each cycle (every cycle_time while work is pending, backing off to 5 ms while the job is
// idle; a node with new work starts a cycle at once and the others join) every node contributes
// one message to an AllgathervAnySize: its newest decision, its newly ready tensors (full spec
// or response-cache id), a local failure, a shutdown flag. Every node runs the same
// deterministic function on the gathered messages, so all nodes execute the same groups in the
// same order with the same θ (invariant 1: the agreed decision is the smallest epoch among the
// nodes; the first cycle that executes a tensor of step s fixes the decision of step s). Specs
// that differ across nodes fail the tensor on every node with a message naming the ranks, tensor
// and field; names some nodes never post fail after mismatch_timeout / moved_on_grace; another
// node's FailLocal or a communicator failure fails every pending and later tensor (invariant 3).
// Compression keeps one error-feedback residual per tensor name (invariant 2). The data path is
// described in executor.h, fusion in fusion_plan.h, the statistics in step_stats.h, the step log
// in step_log.h and the negotiation in negotiation.h.
//
// Thread-safety: Enqueue, FailLocal and Shutdown may be called from any thread. Enqueue and
// FailLocal never block; Shutdown blocks for at most about `timeout` (plus, when the other
// daemons do not agree, the communicator's op_timeout if a collective is in flight). Callbacks
// run on the engine's thread, or on the caller's thread of Enqueue once the engine has stopped.
// NodeTensor::posted_at_ns is read as absl::GetCurrentTimeNanos() time (Unix epoch ns).
#ifndef GRAVAC_DAEMON_ENGINE_ENGINE_H_
#define GRAVAC_DAEMON_ENGINE_ENGINE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/logging.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"
#include "daemon/engine/types.h"

namespace gravac::daemon {

class DaemonMetrics;

struct EngineOptions {
  int node_rank = 0;
  std::vector<NodeLayout> layout;  // per node, in node order
  JobConfig job;
  size_t fusion_threshold_bytes = 64 << 20;
  absl::Duration cycle_time = absl::Milliseconds(1);
  absl::Duration stall_warning = absl::Seconds(60);
  std::string step_log_path;  // "" = none
  std::string timeline_path;  // "" = none; written by node 0 (Engine::StartTimeline)
  Logger* log = nullptr;      // core/logging.h; nullptr = no log lines
  // daemon/daemon_metrics.h: steps, phases, collective latencies, bytes, stalls and errors;
  // nullptr = no metrics. Must outlive the engine.
  DaemonMetrics* metrics = nullptr;
  // Every node lists a tensor that some other node lacks and nothing moved for this long: the
  // partial tensors fail on every node ("name missing"). Zero disables the check.
  absl::Duration mismatch_timeout = absl::Seconds(5);
  // A tensor of step s waits this long for nodes that already posted a later step, then fails
  // on every node ("name missing"). Steps must not decrease on a rank. Zero disables the check.
  absl::Duration moved_on_grace = absl::Seconds(1);
  // The time stall_warning, mismatch_timeout and moved_on_grace are measured on (core/clock.h);
  // nullptr = the real clock. Must outlive the engine.
  const Clock* clock = nullptr;
  // The job's collectives in device memory (gravacd passes its nccl ones; null: none): the
  // cross-node step of the groups they can carry runs over them, their data kept in device memory
  // (executor.h, "Device step"); every other group runs over the Communicator. Not owned; must
  // outlive the engine. device_timeout bounds their waits.
  collectives::DeviceCollectives* device_collectives = nullptr;
  absl::Duration device_timeout = absl::Seconds(30);
};

namespace internal {
class EngineCore;  // engine_core.h
}  // namespace internal

class Engine {
 public:
  // Takes the communicator over the daemons (rank = node rank); starts the background thread.
  // Fails with InvalidArgument on an inconsistent layout (size != comm size, node_rank out of
  // range, ranks not contiguous) or an unknown compressor.
  static absl::StatusOr<std::unique_ptr<Engine>> Start(
      EngineOptions options, std::unique_ptr<collectives::Communicator> comm,
      DecisionSource* decisions, StatsSink* stats);

  // Thread-safe, non-blocking. `done` is called exactly once (also on shutdown/failure).
  void Enqueue(NodeTensor tensor, DoneCallback done);

  // Horovod's timeline (timeline.h): starts writing a Chrome trace of this node's tensors to
  // `path` (node 0 only, as Horovod writes on rank 0: other nodes return OK and write nothing),
  // or stops it. Thread-safe; Start fails naming the path when it cannot be opened.
  absl::Status StartTimeline(const std::string& path);
  void StopTimeline();

  // A local worker or the local side failed: fail every pending tensor on every node with
  // `status` (other nodes learn it through the negotiation) and refuse later ones.
  void FailLocal(absl::Status status);

  // Agrees shutdown with the other nodes (bounded), stops the thread, fails leftovers.
  absl::Status Shutdown(absl::Duration timeout);

  ~Engine();  // Shutdown with a short timeout if not done

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

 private:
  explicit Engine(std::unique_ptr<internal::EngineCore> core);

  std::unique_ptr<internal::EngineCore> core_;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_ENGINE_H_

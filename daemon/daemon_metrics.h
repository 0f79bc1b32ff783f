// DaemonMetrics: gravacd's Prometheus metric families (docs/METRICS.md, the gravacd table of the
// metrics contract), registered in the process's registry (core/metrics.h) with the constant
// label node="<node name>", and small typed methods the daemon's components call at the events
// they observe. Components take a `DaemonMetrics*` in their options; nullptr = no metrics.
//
//   ASSIGN_OR_RETURN(auto endpoint, MetricsEndpoint::Start(options.metrics_address));
//   ASSIGN_OR_RETURN(auto metrics, DaemonMetrics::Create(endpoint->registry(), "n0", 4));
//   metrics->OnStepDone(stats);                      // steps, step time, bytes, applied θ
//   RETURN_IF_ERROR(TimedCollective(metrics.get(), CollectiveOp::kDenseAllreduce,
//                                   [&] { return comm->Allreduce(...); }));
//
// Families (all carry node): gravac_node_info{node_rank,version}, gravac_connected_workers,
// gravac_expected_workers, gravac_controller_connected, gravac_peer_nodes, gravac_applied_theta,
// gravac_applied_decision_epoch, gravac_decisions_received_total, gravac_steps_total,
// gravac_step_duration_seconds, gravac_engine_phase_seconds_total{phase},
// gravac_collective_duration_seconds{op}, gravac_sent_bytes_total{kind},
// gravac_dense_equivalent_bytes_total, gravac_saved_bytes_total, gravac_compressed_tensors_total,
// gravac_shm_handoff_duration_seconds{direction}, gravac_stalls_total, gravac_errors_total{kind}.
// Every bounded label value (phase, op, kind, direction; errors_total's kind is one of the 16
// non-OK status codes) exists from the start with value 0, so rates and dashboards see the
// series before the first event.
//
// Engine phases: the engine's time per group splits into compression (from the group's start to
// its first data-plane collective: compensation, compression, fusion packing), exchange (inside
// the collectives, recorded by TimedCollective), decompression (from the last collective to the
// group's end: decoding, summing, averaging, unpacking); negotiation is a cycle's negotiation
// (collective and processing); local_reduce and handoff are the local side's reduction and the
// rest of its shared-memory handoff.
//
// Per-job series (gravacd --serve_jobs): CreateForJob registers the same families and adds every
// series with the extra labels job_name="<name>", run_id="<run id>" (as the controller's per-job
// series), so one node serving several jobs reports each job's steps, bytes, θ and errors apart;
// the node's totals are sum without (job_name, run_id). Create (one-job mode) adds them without
// those labels. A DaemonMetrics removes its series from the families when it is destroyed (the
// families stay registered); two live DaemonMetrics must not have the same node, job and run id
// (they would share series).
//
// Thread-safety: every method is thread-safe (prometheus-cpp metrics are; the group window is
// under a mutex). The registry must outlive the DaemonMetrics.
#ifndef GRAVAC_DAEMON_DAEMON_METRICS_H_
#define GRAVAC_DAEMON_DAEMON_METRICS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "core/job_id.h"
#include "core/job_types.h"
#include "core/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gravac::daemon {

// Label op of gravac_collective_duration_seconds.
enum class CollectiveOp { kDenseAllreduce, kSparseAllgather, kAllgather, kBroadcast, kNegotiation };
// Label phase of gravac_engine_phase_seconds_total.
enum class EnginePhase {
  kNegotiation,
  kCompression,
  kExchange,
  kDecompression,
  kLocalReduce,
  kHandoff
};
// Label kind of gravac_sent_bytes_total.
enum class BytesKind { kDense, kSparse };
// Label direction of gravac_shm_handoff_duration_seconds.
enum class HandoffDirection { kIn, kOut };

std::string_view CollectiveOpLabel(CollectiveOp op);
std::string_view EnginePhaseLabel(EnginePhase phase);

class DaemonMetrics {
 public:
  // Registers every family in `registry` with node="<node_name>"; expected_workers is
  // --local_size. Fails (InvalidArgument) when the registry already holds one of the names with
  // other constant labels or another type (prometheus-cpp throws; the exception stays here).
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Create(prometheus::Registry& registry,
                                                               std::string_view node_name,
                                                               int expected_workers);
  // As Create, every series also labelled job_name and run_id of `job` (expected_workers: the
  // job's workers on this node).
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> CreateForJob(
      prometheus::Registry& registry, std::string_view node_name, const JobId& job,
      int expected_workers);
  ~DaemonMetrics();  // removes this object's series
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // Joined: gravac_node_info gets node_rank, gravac_peer_nodes the number of nodes.
  void SetJoined(int node_rank, int nodes);
  void SetConnectedWorkers(int workers);
  void SetControllerConnected(bool connected);
  void OnDecisionReceived();

  // One step's statistics as handed to the StatsSink: steps, step time, dense-equivalent and
  // saved bytes, applied θ and decision epoch.
  void OnStepDone(const NodeStepStats& stats);

  // One collective's wall time. Data-plane ops (all but kNegotiation) also count as the exchange
  // phase and mark the current group's window (OnGroupDone).
  void ObserveCollective(CollectiveOp op, int64_t start_ns, int64_t end_ns);
  // A group the engine ran from start_ns to end_ns: the time before its first data-plane
  // collective since the last OnGroupDone counts as compression, after the last as
  // decompression (all of it as compression when it ran none).
  void OnGroupDone(int64_t start_ns, int64_t end_ns);

  void AddSentBytes(BytesKind kind, int64_t bytes);
  void AddCompressedTensors(int64_t tensors);
  void AddPhase(EnginePhase phase, double seconds);
  void ObserveHandoff(HandoffDirection direction, double seconds);
  void OnStalls(int64_t stalls);
  // A tensor (or request) failed with `status` (not OK; OK is ignored).
  void OnError(const absl::Status& status);

 private:
  DaemonMetrics(prometheus::Registry& registry, std::string node_name,
                prometheus::Labels job_labels, int expected_workers);
  // `labels` plus this object's job labels.
  prometheus::Labels With(prometheus::Labels labels) const;
  // Adds the series of `labels` (with the job labels) to `family` and remembers to remove it.
  template <typename T, typename... Args>
  T& Series(prometheus::Family<T>& family, const prometheus::Labels& labels, Args&&... args);

  const std::string node_;
  const prometheus::Labels job_labels_;        // {} or {job_name, run_id}
  std::vector<std::function<void()>> removers_;  // one per series added (not info_)
  prometheus::Family<prometheus::Gauge>& info_family_;
  prometheus::Gauge* info_;  // the current gravac_node_info series
  prometheus::Gauge& connected_workers_;
  prometheus::Gauge& controller_connected_;
  prometheus::Gauge& peer_nodes_;
  prometheus::Gauge& applied_theta_;
  prometheus::Gauge& applied_epoch_;
  prometheus::Counter& decisions_received_;
  prometheus::Counter& steps_;
  prometheus::Histogram& step_duration_;
  std::array<prometheus::Counter*, 6> phases_{};
  std::array<prometheus::Histogram*, 5> collectives_{};
  std::array<prometheus::Counter*, 2> sent_bytes_{};
  prometheus::Counter& dense_equivalent_bytes_;
  prometheus::Counter& saved_bytes_;
  prometheus::Counter& compressed_tensors_;
  std::array<prometheus::Histogram*, 2> handoff_{};
  prometheus::Counter& stalls_;
  prometheus::Family<prometheus::Counter>& errors_;

  // core/mutex.h says why not absl::Mutex.
  Mutex mu_;
  int64_t window_first_ns_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no collective since OnGroupDone
  int64_t window_last_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

// Runs `collective` (a Communicator call returning absl::Status) and records its wall time under
// `op`; `metrics` may be null (then it only runs the call).
template <typename F>
absl::Status TimedCollective(DaemonMetrics* metrics, CollectiveOp op, F&& collective) {
  if (metrics == nullptr) return std::forward<F>(collective)();
  const int64_t start = absl::GetCurrentTimeNanos();
  absl::Status status = std::forward<F>(collective)();
  metrics->ObserveCollective(op, start, absl::GetCurrentTimeNanos());
  return status;
}

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_DAEMON_METRICS_H_

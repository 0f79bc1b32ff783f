#include "daemon/daemon_metrics.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/absl_compat.h"
#include "core/enum_names.h"
#include "core/metrics.h"
#include "daemon/engine/types.h"

#ifndef GRAVAC_VERSION
#define GRAVAC_VERSION "unknown"
#endif

namespace gravac::daemon {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Every op and phase with its label.
constexpr EnumName<CollectiveOp> kOps[] = {
    {CollectiveOp::kDenseAllreduce, "dense_allreduce"},
    {CollectiveOp::kSparseAllgather, "sparse_allgather"}, {CollectiveOp::kAllgather, "allgather"},
    {CollectiveOp::kBroadcast, "broadcast"}, {CollectiveOp::kNegotiation, "negotiation"}};
constexpr EnumName<EnginePhase> kPhases[] = {
    {EnginePhase::kNegotiation, "negotiation"}, {EnginePhase::kCompression, "compression"},
    {EnginePhase::kExchange, "exchange"},       {EnginePhase::kDecompression, "decompression"},
    {EnginePhase::kLocalReduce, "local_reduce"}, {EnginePhase::kHandoff, "handoff"}};

double Seconds(int64_t ns) { return static_cast<double>(std::max<int64_t>(0, ns)) * 1e-9; }

Family<Gauge>& GaugeFamily(prometheus::Registry& r, const Labels& node, const char* name,
                           const char* help) {
  return BuildGauge().Name(name).Help(help).Labels(node).Register(r);
}

Family<Counter>& CounterFamily(prometheus::Registry& r, const Labels& node, const char* name,
                               const char* help) {
  return BuildCounter().Name(name).Help(help).Labels(node).Register(r);
}

Family<Histogram>& HistogramFamily(prometheus::Registry& r, const Labels& node, const char* name,
                                   const char* help) {
  return BuildHistogram().Name(name).Help(help).Labels(node).Register(r);
}

}  // namespace

std::string_view CollectiveOpLabel(CollectiveOp op) { return NameOf(kOps, op); }

std::string_view EnginePhaseLabel(EnginePhase phase) { return NameOf(kPhases, phase); }

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Create(prometheus::Registry& registry,
                                                                     std::string_view node_name,
                                                                     int expected_workers) {
  try {
    return std::unique_ptr<DaemonMetrics>(
        new DaemonMetrics(registry, std::string(node_name), {}, expected_workers));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(StrCat(
        "metrics: cannot register gravacd's families for node '", node_name, "': ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::CreateForJob(
    prometheus::Registry& registry, std::string_view node_name, const JobId& job,
    int expected_workers) {
  try {
    return std::unique_ptr<DaemonMetrics>(
        new DaemonMetrics(registry, std::string(node_name),
                          {{"job_name", job.name}, {"run_id", job.run_id}}, expected_workers));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(StrCat("metrics: cannot register gravacd's series of ",
                                             job.ToString(), " on node '", node_name,
                                             "': ", e.what()));
  }
}

Labels DaemonMetrics::With(Labels labels) const {
  labels.insert(job_labels_.begin(), job_labels_.end());
  return labels;
}

template <typename T, typename... Args>
T& DaemonMetrics::Series(Family<T>& family, const Labels& labels, Args&&... args) {
  T& series = family.Add(With(labels), std::forward<Args>(args)...);
  removers_.push_back([&family, &series] { family.Remove(&series); });
  return series;
}

DaemonMetrics::DaemonMetrics(prometheus::Registry& r, std::string node_name, Labels job_labels,
                             int expected_workers)
    : node_(std::move(node_name)),
      job_labels_(std::move(job_labels)),
      info_family_(GaugeFamily(r, {{"node", node_}}, "gravac_node_info",
                               "Identity of this gravacd (value 1): its node rank once joined "
                               "and the gravac version")),
      info_(&info_family_.Add(With({{"node_rank", ""}, {"version", GRAVAC_VERSION}}))),
      connected_workers_(
          Series(GaugeFamily(r, {{"node", node_}}, "gravac_connected_workers",
                             "Local workers currently connected to the daemon's socket"),
                 {})),
      controller_connected_(Series(GaugeFamily(r, {{"node", node_}}, "gravac_controller_connected",
                                               "1 while the decision stream from the controller "
                                               "is up, else 0"),
                                   {})),
      peer_nodes_(Series(GaugeFamily(r, {{"node", node_}}, "gravac_peer_nodes",
                                     "Nodes in the data-plane communicator (job size); 0 before "
                                     "join"),
                         {})),
      applied_theta_(Series(GaugeFamily(r, {{"node", node_}}, "gravac_applied_theta",
                                        "Compression factor theta this node applied at its last "
                                        "executed step (1 = dense)"),
                            {})),
      applied_epoch_(Series(GaugeFamily(r, {{"node", node_}}, "gravac_applied_decision_epoch",
                                        "Decision epoch of this node's last executed step"),
                            {})),
      decisions_received_(Series(CounterFamily(r, {{"node", node_}},
                                               "gravac_decisions_received_total",
                                               "Decisions received from the controller"),
                                 {})),
      steps_(Series(CounterFamily(r, {{"node", node_}}, "gravac_steps_total",
                                  "Steps this node completed (statistics handed to the "
                                  "controller)"),
                    {})),
      step_duration_(Series(HistogramFamily(r, {{"node", node_}}, "gravac_step_duration_seconds",
                                            "This node's step time"),
                            {}, ExponentialBuckets(0.001, 2, 16))),
      dense_equivalent_bytes_(
          Series(CounterFamily(r, {{"node", node_}}, "gravac_dense_equivalent_bytes_total",
                               "Bytes a dense ring allreduce of the same compressible tensors "
                               "would have sent"),
                 {})),
      saved_bytes_(Series(CounterFamily(r, {{"node", node_}}, "gravac_saved_bytes_total",
                                        "Dense-equivalent minus sent bytes per step, summed "
                                        "(steps that sent more count 0)"),
                          {})),
      compressed_tensors_(Series(CounterFamily(r, {{"node", node_}},
                                               "gravac_compressed_tensors_total",
                                               "Tensors sent compressed"),
                                 {})),
      stalls_(Series(CounterFamily(r, {{"node", node_}}, "gravac_stalls_total",
                                   "Stall warnings: tensors waiting for ranks that did not post "
                                   "them"),
                     {})),
      errors_(CounterFamily(r, {{"node", node_}}, "gravac_errors_total",
                            "Tensors failed, by status code")) {
  const Labels node{{"node", node_}};
  info_->Set(1);
  Series(GaugeFamily(r, node, "gravac_expected_workers",
                     "Local workers this daemon expects (--local_size; with --serve_jobs the "
                     "job's workers on this node)"),
         {})
      .Set(expected_workers);
  auto& phases = CounterFamily(r, node, "gravac_engine_phase_seconds_total",
                               "Time the daemon spent per phase of its steps");
  for (const auto& [p, label] : kPhases) {
    phases_[static_cast<int>(p)] = &Series(phases, {{"phase", std::string(label)}});
  }
  auto& collectives = HistogramFamily(r, node, "gravac_collective_duration_seconds",
                                      "Wall time of one collective between the daemons");
  for (const auto& [op, label] : kOps) {
    collectives_[static_cast<int>(op)] =
        &Series(collectives, {{"op", std::string(label)}}, ExponentialBuckets(0.0001, 2, 18));
  }
  auto& sent = CounterFamily(r, node, "gravac_sent_bytes_total",
                             "Data-plane payload bytes this node sent (allreduce payloads by "
                             "kind; allgather and broadcast payloads count as dense)");
  sent_bytes_[static_cast<int>(BytesKind::kDense)] = &Series(sent, {{"kind", "dense"}});
  sent_bytes_[static_cast<int>(BytesKind::kSparse)] = &Series(sent, {{"kind", "sparse"}});
  for (int code = 1; code <= 16; ++code) {  // every absl::StatusCode but OK
    Series(errors_,
           {{"kind", StatusKindLabel(absl::Status(static_cast<absl::StatusCode>(code), ""))}});
  }
  auto& handoff = HistogramFamily(r, node, "gravac_shm_handoff_duration_seconds",
                                  "Daemon-side shared-memory handoff per tensor: in = last local "
                                  "post to the engine (incl. local reduce), out = engine result "
                                  "to written back and the workers notified");
  handoff_[static_cast<int>(HandoffDirection::kIn)] =
      &Series(handoff, {{"direction", "in"}}, ExponentialBuckets(0.00001, 2, 20));
  handoff_[static_cast<int>(HandoffDirection::kOut)] =
      &Series(handoff, {{"direction", "out"}}, ExponentialBuckets(0.00001, 2, 20));
}

DaemonMetrics::~DaemonMetrics() {
  info_family_.Remove(info_);
  for (const auto& remove : removers_) remove();
}

void DaemonMetrics::SetJoined(int node_rank, int nodes) {
  prometheus::Gauge* next =
      &info_family_.Add(With({{"node_rank", StrCat(node_rank)}, {"version", GRAVAC_VERSION}}));
  next->Set(1);
  if (next != info_) {
    info_family_.Remove(info_);
    info_ = next;
  }
  peer_nodes_.Set(nodes);
}

void DaemonMetrics::SetConnectedWorkers(int workers) { connected_workers_.Set(workers); }

void DaemonMetrics::SetControllerConnected(bool connected) {
  controller_connected_.Set(connected ? 1 : 0);
}

void DaemonMetrics::OnDecisionReceived() { decisions_received_.Increment(); }

void DaemonMetrics::OnStepDone(const NodeStepStats& s) {
  steps_.Increment();
  step_duration_.Observe(std::max(0.0, s.step_seconds));
  dense_equivalent_bytes_.Increment(static_cast<double>(std::max<int64_t>(0, s.bytes_dense)));
  saved_bytes_.Increment(static_cast<double>(std::max<int64_t>(0, s.bytes_dense - s.bytes_sent)));
  applied_theta_.Set(s.theta_used);
  applied_epoch_.Set(static_cast<double>(s.decision_epoch));
}

void DaemonMetrics::ObserveCollective(CollectiveOp op, int64_t start_ns, int64_t end_ns) {
  const double seconds = Seconds(end_ns - start_ns);
  collectives_[static_cast<int>(op)]->Observe(seconds);
  if (op == CollectiveOp::kNegotiation) return;
  phases_[static_cast<int>(EnginePhase::kExchange)]->Increment(seconds);
  MutexLock lock(&mu_);
  if (window_first_ns_ == 0) window_first_ns_ = start_ns;
  window_last_ns_ = end_ns;
}

void DaemonMetrics::OnGroupDone(int64_t start_ns, int64_t end_ns) {
  int64_t first = 0, last = 0;
  {
    MutexLock lock(&mu_);
    std::swap(first, window_first_ns_);
    std::swap(last, window_last_ns_);
  }
  if (first == 0) {
    AddPhase(EnginePhase::kCompression, Seconds(end_ns - start_ns));
    return;
  }
  AddPhase(EnginePhase::kCompression, Seconds(first - start_ns));
  AddPhase(EnginePhase::kDecompression, Seconds(end_ns - last));
}

void DaemonMetrics::AddSentBytes(BytesKind kind, int64_t bytes) {
  if (bytes > 0) sent_bytes_[static_cast<int>(kind)]->Increment(static_cast<double>(bytes));
}

void DaemonMetrics::AddCompressedTensors(int64_t tensors) {
  if (tensors > 0) compressed_tensors_.Increment(static_cast<double>(tensors));
}

void DaemonMetrics::AddPhase(EnginePhase phase, double seconds) {
  if (seconds > 0) phases_[static_cast<int>(phase)]->Increment(seconds);
}

void DaemonMetrics::ObserveHandoff(HandoffDirection direction, double seconds) {
  handoff_[static_cast<int>(direction)]->Observe(std::max(0.0, seconds));
}

void DaemonMetrics::OnStalls(int64_t stalls) {
  if (stalls > 0) stalls_.Increment(static_cast<double>(stalls));
}

void DaemonMetrics::OnError(const absl::Status& status) {
  if (status.ok()) return;
  errors_.Add(With({{"kind", StatusKindLabel(status)}})).Increment();
}

}  // namespace gravac::daemon

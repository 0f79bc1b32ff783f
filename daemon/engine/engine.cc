#include "daemon/engine/engine.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/mutex.h"
#include "core/status.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/executor.h"
#include "daemon/engine/negotiation.h"
#include "daemon/engine/spec_agreement.h"
#include "daemon/engine/timeline.h"

namespace gravac::daemon {
namespace internal {
namespace {

// Empty when `t` is well formed for this node, else why not.
std::string Validate(const NodeTensor& t, const NodeLayout& node) {
  const TensorSpec& s = t.spec;
  if (s.name.empty()) return "empty tensor name";
  for (int64_t d : s.shape) {
    if (d < 0) return absl::StrFormat("shape has a negative dimension %d", d);
  }
  const size_t elem = collectives::DataTypeSize(s.dtype);
  if (s.kind == CollectiveKind::kAllgather) {
    if (s.shape.empty()) return "allgather of a scalar (shape needs a first dimension)";
    int local_ranks = 0;  // of the tensor's process set
    for (int r = node.first_rank; r < node.first_rank + node.local_count; ++r) {
      const bool in_set = s.process_set.empty() ||
                          std::binary_search(s.process_set.begin(), s.process_set.end(), r);
      local_ranks += in_set ? 1 : 0;
    }
    if (static_cast<int>(t.first_dims.size()) != local_ranks) {
      return absl::StrFormat("allgather with %d first dimensions for %d local ranks",
                             t.first_dims.size(), local_ranks);
    }
    int64_t rows = 0;
    for (int64_t d : t.first_dims) rows += d;
    const int64_t row = Elements(std::vector<int64_t>(s.shape.begin() + 1, s.shape.end()));
    if (static_cast<int64_t>(t.data.size()) != rows * row * static_cast<int64_t>(elem)) {
      return absl::StrFormat("allgather data of %d bytes for %d rows of %d elements", t.data.size(),
                             rows, row);
    }
    return "";
  }
  const int64_t want = Elements(s.shape) * static_cast<int64_t>(elem);
  if (t.device_data != nullptr) {  // reduced in device memory: `data` is empty
    if (static_cast<int64_t>(t.device_data->bytes()) != want || !t.data.empty()) {
      return absl::StrFormat("device data of %d bytes (and %d in host memory) for shape of %d bytes",
                             t.device_data->bytes(), t.data.size(), want);
    }
    return "";
  }
  if (static_cast<int64_t>(t.data.size()) != want) {
    return absl::StrFormat("data of %d bytes for shape of %d bytes", t.data.size(), want);
  }
  return "";
}

// Appends which node a "peer rank N" of a communicator message is.
std::string DescribePeer(std::string_view message, const std::vector<NodeLayout>& layout) {
  const size_t at = message.find("peer rank ");
  if (at == std::string_view::npos) return "";
  const int peer = std::atoi(std::string(message.substr(at + 10, 8)).c_str());
  if (peer < 0 || peer >= static_cast<int>(layout.size())) return "";
  return absl::StrFormat(" [peer daemon: %s]", FormatNode(layout, peer));
}

}  // namespace

// Forwards each step's statistics to the engine's StatsSink (if any) after counting them in the
// daemon's metrics.
class MeteredStats : public StatsSink {
 public:
  MeteredStats(DaemonMetrics* metrics, StatsSink* next) : metrics_(metrics), next_(next) {}
  void Report(const NodeStepStats& stats) override {
    metrics_->OnStepDone(stats);
    if (next_ != nullptr) next_->Report(stats);
  }

 private:
  DaemonMetrics* const metrics_;
  StatsSink* const next_;
};

class EngineCore {
 public:
  EngineCore(EngineOptions options, std::unique_ptr<collectives::Communicator> comm,
             DecisionSource* decisions, std::unique_ptr<StatsSink> metered_stats,
             std::unique_ptr<Timeline> timeline, std::unique_ptr<Executor> executor)
      : options_(std::move(options)),
        timeline_(std::move(timeline)),
        comm_(std::move(comm)),
        decisions_(decisions),
        metered_stats_(std::move(metered_stats)),
        executor_(std::move(executor)),
        negotiator_(options_.node_rank, options_.layout) {}

  absl::Status StartTimeline(const std::string& path) {
    if (options_.node_rank != 0) return absl::OkStatus();
    return timeline_->Start(path);
  }
  void StopTimeline() { timeline_->Stop(); }

  void StartThread() {
    thread_ = std::thread([this] { Loop(); });
  }

  void Enqueue(NodeTensor tensor, DoneCallback done) {
    if (!done) done = [](TensorResult) {};
    absl::Status refused;
    {
      MutexLock lock(&mu_);
      if (!thread_done_) {
        inbox_.push_back({std::move(tensor), std::move(done), absl::GetCurrentTimeNanos()});
        cv_.SignalAll();
        return;
      }
      refused = terminal_;
    }
    TensorResult r;
    r.status = refused;
    if (options_.metrics != nullptr) options_.metrics->OnError(refused);
    if (done) done(std::move(r));
  }

  void FailLocal(absl::Status status) {
    MutexLock lock(&mu_);
    if (local_failure_.ok() && !status.ok()) local_failure_ = std::move(status);
    cv_.SignalAll();
  }

  absl::Status Shutdown(absl::Duration timeout) {
    mu_.Lock();
    if (!shutdown_called_) {
      shutdown_called_ = true;
      shutdown_requested_ = true;
      cv_.SignalAll();
      const absl::Time deadline = absl::Now() + timeout;
      while (!thread_done_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
      }
      if (!thread_done_) {
        abort_ = true;
        shutdown_status_ = absl::DeadlineExceededError(absl::StrFormat(
            "%s: engine: shutdown not agreed with the other daemons within %s",
            FormatNode(options_.layout, options_.node_rank), absl::FormatDuration(timeout)));
        cv_.SignalAll();
      }
      mu_.Unlock();
      if (thread_.joinable()) thread_.join();
      comm_.reset();  // closes the endpoints, so peers still waiting fail fast
      mu_.Lock();
      if (shutdown_status_.ok() && !absl::IsCancelled(terminal_)) shutdown_status_ = terminal_;
      shutdown_finished_ = true;
      cv_.SignalAll();
    }
    while (!shutdown_finished_) cv_.Wait(&mu_);  // a concurrent caller waits for the first
    absl::Status status = shutdown_status_;
    mu_.Unlock();
    return status;
  }

 private:
  struct Inbox {
    NodeTensor tensor;
    DoneCallback done;
    int64_t enqueued_ns = 0;
  };
  struct Local {
    NodeTensor tensor;
    DoneCallback done;
    int64_t start_ns = 0;
    int64_t listed_ns = 0;  // when the engine took it (the end of its local phase)
  };

  void Complete(Local& local, TensorResult result) {
    if (local.tensor.spec.kind == CollectiveKind::kJoin) join_check_ = nullptr;
    if (options_.metrics != nullptr) options_.metrics->OnError(result.status);
    if (local.done) local.done(std::move(result));
    local.done = nullptr;
  }

  void FailAll(const absl::Status& status) {
    for (auto& [name, local] : locals_) {
      TensorResult r;
      r.status = status;
      Complete(local, std::move(r));
    }
    locals_.clear();
  }

  // Moves the inbox into locals_ and the next message's entries. Returns false on abort.
  bool TakeInbox(absl::Duration interval, absl::Time last_cycle, NodeMessage* message) {
    std::deque<Inbox> inbox;
    {
      MutexLock lock(&mu_);
      const bool idle = interval > options_.cycle_time;
      const absl::Time deadline = last_cycle + interval;
      while (!abort_ &&
             !(idle && (!inbox_.empty() || !local_failure_.ok() || shutdown_requested_)) &&
             !cv_.WaitWithDeadline(&mu_, deadline)) {
      }
      if (abort_) return false;
      inbox.swap(inbox_);
      message->shutdown = shutdown_requested_;
      if (!local_failure_.ok()) {
        message->failed = true;
        message->failure_code = local_failure_.code();
        message->failure_message = std::string(local_failure_.message());
      }
    }
    const NodeLayout& me = options_.layout[options_.node_rank];
    const int64_t now_ns = absl::GetCurrentTimeNanos();
    for (Inbox& in : inbox) {
      const std::string name = in.tensor.spec.name;
      if (locals_.contains(name)) {
        TensorResult r;
        r.status = absl::InvalidArgumentError(absl::StrFormat(
            "tensor '%s': ranks %s: posted again while the previous one is pending", name,
            FormatRanks(options_.layout, std::vector<int>{options_.node_rank})));
        if (options_.metrics != nullptr) options_.metrics->OnError(r.status);
        in.done(std::move(r));
        continue;
      }
      if (in.tensor.spec.kind == CollectiveKind::kJoin && in.tensor.local_status.ok()) {
        join_check_ = in.tensor.join_check;
      }
      const absl::Status& local = in.tensor.local_status;
      const bool mismatch = local.code() == absl::StatusCode::kFailedPrecondition;
      std::string error =
          local.ok() ? Validate(in.tensor, me) : std::string(local.message());
      // posted_at_ns is absl::GetCurrentTimeNanos() time; ignore implausible values.
      const int64_t posted = in.tensor.posted_at_ns;
      const bool plausible =
          posted > 0 && posted <= now_ns && now_ns - posted < int64_t{3600} * 1000000000;
      in.tensor.spec.samples = in.tensor.samples;
      message->ready.push_back(
          negotiator_.MakeEntry(in.tensor.spec, std::move(error), mismatch));
      locals_.emplace(name, Local{std::move(in.tensor), std::move(in.done),
                                  plausible ? posted : in.enqueued_ns, now_ns});
    }
    return true;
  }

  // One negotiation cycle and the execution of what became ready. Returns false to stop.
  bool Cycle(NodeMessage message, absl::Status* stop) {
    const absl::Time now = ClockOr(options_.clock).Now();
    message.decision = decisions_->Newest();
    if (options_.mismatch_timeout > absl::ZeroDuration()) {
      message.give_up = negotiator_.Deadlocked(now, options_.mismatch_timeout);
    }
    if (options_.moved_on_grace > absl::ZeroDuration()) {
      message.give_up_moved_on = negotiator_.MovedOn(now, options_.moved_on_grace);
    }
    const int64_t negotiation_start = absl::GetCurrentTimeNanos();
    const std::vector<uint8_t> encoded = EncodeMessage(message);
    std::vector<uint8_t> recv;
    std::vector<size_t> sizes;
    absl::Status s = TimedCollective(options_.metrics, CollectiveOp::kNegotiation, [&] {
      return comm_->AllgathervAnySize(encoded, &recv, &sizes);
    });
    if (!s.ok()) {
      *stop = Annotate(s);
      return false;
    }
    std::vector<NodeMessage> messages;
    size_t offset = 0;
    for (size_t n = 0; n < sizes.size(); ++n) {
      auto m = DecodeMessage(absl::MakeConstSpan(recv).subspan(offset, sizes[n]));
      offset += sizes[n];
      if (!m.ok()) {
        *stop = Annotate(m.status());
        return false;
      }
      messages.push_back(*std::move(m));
    }
    auto outcome = negotiator_.Process(messages, now);
    if (!outcome.ok()) {
      *stop = Annotate(outcome.status());
      return false;
    }
    if (!outcome->job_failure.ok()) {
      *stop = outcome->job_failure;
      return false;
    }
    for (const FailedTensor& f : outcome->failed) {
      if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s", f.status.message());
      auto it = locals_.find(f.name);
      if (it == locals_.end()) continue;
      TensorResult r;
      r.status = f.status;
      Complete(it->second, std::move(r));
      locals_.erase(it);
    }
    if (options_.metrics != nullptr) {
      options_.metrics->AddPhase(EnginePhase::kNegotiation,
                                 (absl::GetCurrentTimeNanos() - negotiation_start) * 1e-9);
    }
    if (!outcome->ready.empty() && !Execute(outcome->ready, stop)) return false;
    if (join_check_) AnswerForJoinedRanks();
    if (options_.log != nullptr || options_.metrics != nullptr) {
      const std::vector<std::string> stalls = negotiator_.StallReports(now, options_.stall_warning);
      if (options_.metrics != nullptr) options_.metrics->OnStalls(stalls.size());
      for (const std::string& line : stalls) {
        if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kWarning, "%s", line);
      }
    }
    if (outcome->shutdown) {
      *stop = absl::CancelledError(absl::StrFormat(
          "%s: engine: shut down", FormatNode(options_.layout, options_.node_rank)));
      return false;
    }
    return true;
  }

  // Every local rank has joined: answers each tensor another node listed, in the next message,
  // with zeros (an allreduce all of them posted before) or the error join_check_ gives.
  void AnswerForJoinedRanks() {
    std::deque<Inbox> answers;
    for (TensorSpec& spec : negotiator_.MissingHere()) {
      if (locals_.contains(spec.name)) continue;
      NodeTensor t;
      std::string error = join_check_(spec);
      if (!error.empty()) {
        t.local_status = absl::FailedPreconditionError(std::move(error));
      } else {
        t.data.assign(Elements(spec.shape) * collectives::DataTypeSize(spec.dtype), 0);
      }
      t.spec = std::move(spec);
      const int64_t now_ns = absl::GetCurrentTimeNanos();
      t.posted_at_ns = now_ns;
      answers.push_back({std::move(t), [](TensorResult) {}, now_ns});
    }
    if (answers.empty()) return;
    MutexLock lock(&mu_);
    for (Inbox& in : answers) inbox_.push_back(std::move(in));
    cv_.SignalAll();
  }

  // The job's join is complete: its result is the last joined rank (int32), agreed by the
  // negotiation.
  void CompleteJoin(const ReadyTensor& ready) {
    auto it = locals_.find(ready.spec.name);
    const int64_t now_ns = absl::GetCurrentTimeNanos();
    timeline_->Span(ready.spec.name, "JOIN", now_ns, now_ns,
                    {{"last_joined_rank", absl::StrCat(ready.spec.root_rank)}});
    TensorResult r;
    const int32_t last = ready.spec.root_rank;
    r.data.resize(sizeof(last));
    std::memcpy(r.data.data(), &last, sizeof(last));
    r.collective = "join";
    r.decision_epoch = ready.decision.epoch;
    Complete(it->second, std::move(r));
    locals_.erase(it);
  }

  // A ready tensor's local phase and its negotiation, with one tick per node as it listed it.
  void TraceNegotiation(const ReadyTensor& t, const Local& local, int64_t ready_ns) {
    const std::string& name = t.spec.name;
    timeline_->Span(name, "LOCAL_REDUCE", local.start_ns, local.listed_ns);
    int64_t first = ready_ns;
    for (int64_t ns : t.listed_ns) {
      if (ns > 0) first = std::min(first, ns);
    }
    std::string kind(CollectiveKindName(t.spec.kind));
    for (char& c : kind) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    timeline_->Span(name, "NEGOTIATE_" + kind, first, ready_ns);
    for (size_t n = 0; n < t.listed_ns.size(); ++n) {
      if (t.listed_ns[n] == 0) continue;  // outside the tensor's process set
      const int nodes[] = {static_cast<int>(n)};
      timeline_->Span(name, FormatRanks(options_.layout, nodes), t.listed_ns[n], t.listed_ns[n]);
    }
  }

  // Runs the ready tensors this node holds, in the agreed order: every node runs the tensors of
  // the process sets it holds ranks of, so the members of a set run its groups in the same order.
  bool Execute(const std::vector<ReadyTensor>& agreed, absl::Status* stop) {
    std::vector<ReadyTensor> all_ready;
    for (const ReadyTensor& t : agreed) {
      if (locals_.contains(t.spec.name)) all_ready.push_back(t);
    }
    if (timeline_->enabled()) {
      const int64_t ready_ns = absl::GetCurrentTimeNanos();
      for (const ReadyTensor& t : all_ready) TraceNegotiation(t, locals_.at(t.spec.name), ready_ns);
    }
    std::vector<ReadyTensor> ready;
    for (const ReadyTensor& t : all_ready) {
      if (t.spec.kind == CollectiveKind::kJoin) {
        CompleteJoin(t);
      } else {
        ready.push_back(t);
      }
    }
    if (ready.empty()) return true;
    std::vector<WorkItem> items(ready.size());
    for (size_t i = 0; i < ready.size(); ++i) {
      Local& local = locals_.at(ready[i].spec.name);
      items[i] = {ready[i], &local.tensor, local.start_ns};
    }
    PlanOptions plan{.world_nodes = static_cast<int>(options_.layout.size()),
                     .fusion_threshold_bytes = options_.fusion_threshold_bytes,
                     .compressor = executor_->compressor(),
                     .value_type = executor_->value_type()};
    std::vector<TensorResult> results(ready.size());
    for (const Group& group : PlanGroups(ready, plan)) {
      const int64_t group_start = absl::GetCurrentTimeNanos();
      absl::Status s = executor_->Run(group, items, &results);
      if (!s.ok()) {
        *stop = Annotate(s);
        return false;
      }
      if (options_.metrics != nullptr) CountGroup(group, results, group_start);
      for (size_t i : group.members) {
        auto it = locals_.find(ready[i].spec.name);
        Complete(it->second, std::move(results[i]));
        locals_.erase(it);
      }
    }
    return true;
  }

  // Phases of a group the executor ran, and the tensors it sent compressed.
  void CountGroup(const Group& group, const std::vector<TensorResult>& results, int64_t start_ns) {
    options_.metrics->OnGroupDone(start_ns, absl::GetCurrentTimeNanos());
    if (group.mode != GroupMode::kSparseAllreduce) return;
    int64_t compressed = 0;
    for (size_t i : group.members) compressed += results[i].status.ok() ? 1 : 0;
    options_.metrics->AddCompressedTensors(compressed);
  }

  absl::Status Annotate(const absl::Status& s) const {
    return absl::Status(
        s.code(),
        absl::StrFormat("%s: engine: %s%s", FormatNode(options_.layout, options_.node_rank),
                        s.message(), DescribePeer(std::string(s.message()), options_.layout)));
  }

  void Loop() {
    absl::Status stop;
    absl::Duration interval = options_.cycle_time;
    const absl::Duration max_idle = std::max(options_.cycle_time, absl::Milliseconds(5));
    absl::Time last = absl::Now();
    while (true) {
      NodeMessage message;
      if (!TakeInbox(interval, last, &message)) {
        stop = absl::CancelledError(
            absl::StrFormat("%s: engine: stopped before the shutdown was agreed",
                            FormatNode(options_.layout, options_.node_rank)));
        break;
      }
      last = absl::Now();
      const bool had_work = !message.ready.empty() || message.failed;
      if (!Cycle(std::move(message), &stop)) break;
      if (had_work || !locals_.empty() || negotiator_.HasPending()) {
        interval = options_.cycle_time;
      } else {
        interval = std::min(interval * 2, max_idle);
      }
    }
    if (!stop.ok() && !absl::IsCancelled(stop) && options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kError, "%s", stop.message());
    }
    executor_->Flush();
    std::deque<Inbox> inbox;
    {
      MutexLock lock(&mu_);
      terminal_ = stop;
      thread_done_ = true;
      inbox.swap(inbox_);
      cv_.SignalAll();
    }
    FailAll(stop);
    for (Inbox& in : inbox) {
      TensorResult r;
      r.status = stop;
      if (options_.metrics != nullptr) options_.metrics->OnError(stop);
      in.done(std::move(r));
    }
  }

  const EngineOptions options_;
  std::unique_ptr<Timeline> timeline_;  // the executor's too
  std::unique_ptr<collectives::Communicator> comm_;
  DecisionSource* decisions_;
  std::unique_ptr<StatsSink> metered_stats_;  // the executor's sink when metrics are on
  std::unique_ptr<Executor> executor_;
  std::thread thread_;

  Mutex mu_;
  CondVar cv_;
  std::deque<Inbox> inbox_ ABSL_GUARDED_BY(mu_);
  absl::Status local_failure_ ABSL_GUARDED_BY(mu_);
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_called_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_finished_ ABSL_GUARDED_BY(mu_) = false;
  bool abort_ ABSL_GUARDED_BY(mu_) = false;
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status terminal_ ABSL_GUARDED_BY(mu_);  // set when the thread ends
  absl::Status shutdown_status_ ABSL_GUARDED_BY(mu_);

  // Engine thread only.
  Negotiator negotiator_;
  std::map<std::string, Local> locals_;
  JoinCheck join_check_;  // set while every local rank has joined
};

}  // namespace internal

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(
    EngineOptions options, std::unique_ptr<collectives::Communicator> comm,
    DecisionSource* decisions, StatsSink* stats) {
  if (comm == nullptr || decisions == nullptr) {
    return absl::InvalidArgumentError("engine: a communicator and a decision source are required");
  }
  const int nodes = static_cast<int>(options.layout.size());
  if (nodes != comm->size() || options.node_rank != comm->rank() || options.node_rank < 0 ||
      options.node_rank >= nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "engine: node %d with a layout of %d nodes over a communicator of rank %d of %d",
        options.node_rank, nodes, comm->rank(), comm->size()));
  }
  int next = 0;
  for (int n = 0; n < nodes; ++n) {
    if (options.layout[n].first_rank != next || options.layout[n].local_count < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "engine: node %d holds ranks [%d, +%d) but ranks must be contiguous from %d", n,
          options.layout[n].first_rank, options.layout[n].local_count, next));
    }
    next += options.layout[n].local_count;
  }
  // The job's sparse value precision ("" = fp32); every node gets the same from the controller.
  kernels::CompressorOptions compressor_options;
  const std::string& values = options.job.sparse_values;
  if (values == "fp16") {
    compressor_options.value_type = kernels::ValueType::kFloat16;
  } else if (values == "bf16") {
    compressor_options.value_type = kernels::ValueType::kBFloat16;
  } else if (values != "fp32" && !values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("engine: job sparse_values '%s' is not one of fp32, fp16, bf16", values));
  }
  std::unique_ptr<kernels::Compressor> compressor;
  if (options.job.compressor != "none" && !options.job.compressor.empty()) {
    ASSIGN_OR_RETURN(compressor,
                     kernels::MakeCompressor(options.job.compressor, compressor_options));
  }
  internal::ExecutorOptions exec{.node_rank = options.node_rank,
                                 .layout = options.layout,
                                 .job = options.job,
                                 .step_log_path = options.step_log_path,
                                 .log = options.log,
                                 .metrics = options.metrics,
                                 .value_type = compressor_options.value_type,
                                 .device_collectives = options.device_collectives,
                                 .device_timeout = options.device_timeout};
  auto timeline = std::make_unique<internal::Timeline>();
  exec.timeline = timeline.get();
  if (!options.timeline_path.empty() && options.node_rank == 0) {
    RETURN_IF_ERROR(timeline->Start(options.timeline_path));
  }
  std::unique_ptr<StatsSink> metered;
  if (options.metrics != nullptr) {
    metered = std::make_unique<internal::MeteredStats>(options.metrics, stats);
    stats = metered.get();
  }
  ASSIGN_OR_RETURN(auto executor, internal::Executor::Create(std::move(exec), comm.get(),
                                                             std::move(compressor), stats));
  auto core = std::make_unique<internal::EngineCore>(std::move(options), std::move(comm), decisions,
                                                     std::move(metered), std::move(timeline),
                                                     std::move(executor));
  core->StartThread();
  return std::unique_ptr<Engine>(new Engine(std::move(core)));
}

Engine::Engine(std::unique_ptr<internal::EngineCore> core) : core_(std::move(core)) {}

Engine::~Engine() { core_->Shutdown(absl::Seconds(2)).IgnoreError(); }

void Engine::Enqueue(NodeTensor tensor, DoneCallback done) {
  core_->Enqueue(std::move(tensor), std::move(done));
}

absl::Status Engine::StartTimeline(const std::string& path) { return core_->StartTimeline(path); }

void Engine::StopTimeline() { core_->StopTimeline(); }

void Engine::FailLocal(absl::Status status) { core_->FailLocal(std::move(status)); }

absl::Status Engine::Shutdown(absl::Duration timeout) { return core_->Shutdown(timeout); }

}  // namespace gravac::daemon

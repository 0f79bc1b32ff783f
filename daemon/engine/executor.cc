#include "daemon/engine/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "core/status.h"
#include "daemon/engine/bytes.h"
#include "kernels/cpu/scatter_add.h"
#include "kernels/wire_format.h"

namespace gravac::daemon::internal {
namespace {

using collectives::DataType;
using collectives::DataTypeSize;

// Ring allreduce: each rank sends 2(P-1)/P of the buffer.
int64_t RingBytes(int64_t bytes, int p) { return p <= 1 ? 0 : bytes * 2 * (p - 1) / p; }

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(
    ExecutorOptions options, collectives::Communicator* comm,
    std::unique_ptr<kernels::Compressor> compressor, StatsSink* stats) {
  ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(options.step_log_path));
  return std::unique_ptr<Executor>(new Executor(std::move(options), comm, std::move(compressor),
                                                stats, std::move(step_log)));
}

Executor::Executor(ExecutorOptions options, collectives::Communicator* comm,
                   std::unique_ptr<kernels::Compressor> compressor, StatsSink* stats,
                   StepLog step_log)
    : options_(std::move(options)),
      comm_(comm),
      job_comm_(comm),
      compressor_(std::move(compressor)),
      steps_(options_.node_rank, options_.job.global_norm, stats),
      step_log_(std::move(step_log)) {
  if (options_.compression_backend &&
      BackendCompression::Runs(compressor_.get(), options_.value_type)) {
    backend_ = std::make_unique<BackendCompression>(options_.log, options_.device_backends);
  }
}

Executor::~Executor() = default;

int Executor::world_size() const {
  if (set_size_ > 0) return set_size_;
  int w = 0;
  for (const NodeLayout& l : options_.layout) w += l.local_count;
  return std::max(1, w);
}

absl::Status Executor::HostData(const WorkItem& item) {
  NodeTensor& t = *item.tensor;
  if (t.device_data == nullptr || t.data.size() == t.device_data->bytes()) return absl::OkStatus();
  t.data.resize(t.device_data->bytes());
  if (absl::Status s = t.device_data->CopyToHost(t.data.data()); !s.ok()) {
    t.data.clear();
    return absl::Status(s.code(), absl::StrFormat("tensor '%s': copying the node's sum from CUDA "
                                                  "device %d to host memory failed: %s",
                                                  item.ready.spec.name, t.device_data->device(),
                                                  s.message()));
  }
  return absl::OkStatus();
}

size_t Executor::Bytes(const WorkItem& item) {
  const NodeTensor& t = *item.tensor;
  return t.device_data != nullptr ? t.device_data->bytes() : t.data.size();
}

absl::Status Executor::CompensateP(const WorkItem& item, Compensated* c) {
  const TensorSpec& s = item.ready.spec;
  const int64_t n = Elements(s.shape);
  c->on_device = false;
  if (backend_ != nullptr && item.tensor->device_data != nullptr) {
    c->p = {};
    ASSIGN_OR_RETURN(const bool in_place,
                     backend_->CompensateFromDevice(s, *item.tensor->device_data, &c->grad_norm));
    if (in_place) {
      c->on_device = backend_->LevelsOnDevice(s.name);
      return absl::OkStatus();
    }
  }
  RETURN_IF_ERROR(HostData(item));
  const auto g = absl::MakeConstSpan(reinterpret_cast<const float*>(item.tensor->data.data()), n);
  if (backend_ != nullptr) {
    c->p = {};
    RETURN_IF_ERROR(backend_->Compensate(s, item.tensor->device, g, &c->grad_norm));
    c->on_device = backend_->LevelsOnDevice(s.name);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(c->p, residuals_.For(s.name, n).CompensateToScratch(g, &c->grad_norm));
  return absl::OkStatus();
}

absl::Status Executor::Select(const WorkItem& item, const Compensated& c, Level level, double theta,
                              kernels::Compressed* out) {
  const TensorSpec& s = item.ready.spec;
  if (backend_ != nullptr) return backend_->Select(s.name, level, theta, out);
  return compressor_->Compress(c.p, theta, {s.name, s.step, options_.job.job_seed}, out);
}

absl::Status Executor::Commit(const WorkItem& item, const Compensated& c,
                              const kernels::Compressed& sent, Level level) {
  const std::string& name = item.ready.spec.name;
  if (backend_ != nullptr) return backend_->Commit(name, level);
  return residuals_.For(name, static_cast<int64_t>(c.p.size())).CommitScratch(sent);
}

absl::Status Executor::ClearResidual(const WorkItem& item, const Compensated& c) {
  const std::string& name = item.ready.spec.name;
  if (backend_ != nullptr) return backend_->CommitDense(name);
  residuals_.For(name, static_cast<int64_t>(c.p.size())).Clear();
  return absl::OkStatus();
}

absl::Status Executor::CopyP(const WorkItem& item, const Compensated& c, void* out, size_t bytes) {
  if (backend_ != nullptr) return backend_->CopyP(item.ready.spec.name, out, bytes);
  if (bytes != c.p.size() * sizeof(float)) {
    return absl::InternalError(
        absl::StrFormat("tensor '%s': p has %d elements, the buffer %d bytes", item.ready.spec.name,
                        c.p.size(), bytes));
  }
  if (bytes > 0) std::memcpy(out, c.p.data(), bytes);
  return absl::OkStatus();
}

absl::Status Executor::CandidateFromMin(const WorkItem& item, Compensated* c) {
  const TensorSpec& s = item.ready.spec;
  if (backend_ != nullptr && !c->on_device) {
    // θ_min's level lies in the CPU backend's buffers: read there, not copied out.
    RETURN_IF_ERROR(backend_->CandidateFromMin(s.name, item.ready.decision.theta_candidate,
                                               &c->levels.at_candidate));
    ASSIGN_OR_RETURN(c->levels.norm_min, backend_->Norm(s.name, Level::kMin));
    c->levels.norm_candidate = kernels::L2Norm(c->levels.at_candidate);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(compressor_->CompressFrom(c->levels.at_min, item.ready.decision.theta_candidate,
                                            {s.name, s.step, options_.job.job_seed},
                                            &c->levels.at_candidate));
  c->levels.norm_min = kernels::L2Norm(c->levels.at_min);
  c->levels.norm_candidate = kernels::L2Norm(c->levels.at_candidate);
  return absl::OkStatus();
}

absl::Status Executor::LevelsOnDevice(const WorkItem& item, Compensated* c, bool select_min,
                                      bool select_candidate) {
  const std::string& name = item.ready.spec.name;
  if (select_min) {
    RETURN_IF_ERROR(backend_->Select(name, Level::kMin, options_.job.theta_min, nullptr));
  }
  if (select_candidate) {
    // θ_c's level straight from p: for topk the same message as from θ_min's (CompressFrom).
    const double theta_c = std::max(1.0, item.ready.decision.theta_candidate);
    RETURN_IF_ERROR(backend_->Select(name, Level::kCandidate, theta_c, nullptr));
  }
  ASSIGN_OR_RETURN(c->levels.norm_min, backend_->Norm(name, Level::kMin));
  ASSIGN_OR_RETURN(c->levels.norm_candidate, backend_->Norm(name, Level::kCandidate));
  return absl::OkStatus();
}

absl::Status Executor::Compensate(const WorkItem& item, Compensated* c) {
  RETURN_IF_ERROR(CompensateP(item, c));
  if (c->on_device) return LevelsOnDevice(item, c, true, true);
  const double theta_min = options_.job.theta_min, theta_c = item.ready.decision.theta_candidate;
  // Multi-level compression (kernels::CompressMultiLevel): θ_c's level from θ_min's.
  RETURN_IF_ERROR(Select(item, *c, Level::kMin, theta_min, &c->levels.at_min));
  if (theta_c >= theta_min && theta_min >= 1.0) return CandidateFromMin(item, c);
  RETURN_IF_ERROR(
      Select(item, *c, Level::kCandidate, std::max(1.0, theta_c), &c->levels.at_candidate));
  c->levels.norm_min = kernels::L2Norm(c->levels.at_min);
  c->levels.norm_candidate = kernels::L2Norm(c->levels.at_candidate);
  return absl::OkStatus();
}

Executor::StepStats* Executor::StatsFor(const WorkItem& item) {
  // The policy's statistics are the whole job's: a process set's tensors are not in them.
  if (!item.ready.spec.process_set.empty()) return nullptr;
  return steps_.For(item.ready.spec.step, item.ready.decision, item.start_ns,
                    item.tensor->samples);
}

void Executor::AddNorms(const WorkItem& item, const Compensated& c) {
  steps_.AddNorms(StatsFor(item), c.grad_norm, c.levels.norm_min, c.levels.norm_candidate);
}

void Executor::MarkExchange(bool start) {
  (start ? timing_.exchange_start_ns : timing_.exchange_end_ns) = absl::GetCurrentTimeNanos();
}

void Executor::LogGroup(const Group& group, const std::vector<WorkItem>& items, double theta,
                        const char* collective) {
  if (options_.timeline != nullptr && options_.timeline->enabled()) {
    TraceGroup(group, items, theta, collective, absl::GetCurrentTimeNanos());
  }
  if (!step_log_.enabled()) return;
  const WorkItem& first = items[group.members.front()];
  GroupRecord record{.step = first.ready.spec.step,
                     .epoch = first.ready.decision.epoch,
                     .theta = theta,
                     .collective = collective,
                     .tensors = {}};
  for (size_t i : group.members) record.tensors.push_back(items[i].ready.spec.name);
  if (absl::Status s = step_log_.Append(record, timing_); !s.ok()) {
    // The log is a diagnostic: training goes on without it.
    if (options_.log != nullptr) GRAVAC_LOG(*options_.log, kError, "%s; step log off", s.message());
    step_log_ = StepLog();
  }
}

void Executor::TraceGroup(const Group& group, const std::vector<WorkItem>& items, double theta,
                          const char* collective, int64_t end_ns) {
  const WorkItem& first = items[group.members.front()];
  const int64_t epoch = first.ready.decision.epoch;
  const int64_t start = timing_.start_ns;
  const int64_t xs = timing_.exchange_start_ns > 0 ? timing_.exchange_start_ns : end_ns;
  const int64_t xe = timing_.exchange_end_ns >= xs ? timing_.exchange_end_ns : xs;
  // Horovod's phase names for a dense fused allreduce; gravac's for the compressed exchange.
  const char* op = "ALLREDUCE";
  const char* phases[3] = {"MEMCPY_IN_FUSION_BUFFER", "RING_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"};
  switch (group.mode) {
    case GroupMode::kDenseAllreduce:
      break;
    case GroupMode::kSparseAllreduce:
      phases[0] = "COMPRESS";
      phases[1] = "SPARSE_ALLGATHER";
      phases[2] = "DECOMPRESS";
      break;
    case GroupMode::kAllgather:
      op = "ALLGATHER";
      phases[0] = "PREPARE";
      phases[1] = "RING_ALLGATHER";
      phases[2] = "COPY_OUT";
      break;
    case GroupMode::kBroadcast:
      op = "BROADCAST";
      phases[0] = "PREPARE";
      phases[1] = "TREE_BROADCAST";
      phases[2] = "COPY_OUT";
      break;
  }
  const Timeline::Args args = {{"collective", Timeline::Quote(collective)},
                               {"theta", absl::StrFormat("%g", theta)},
                               {"decision_epoch", absl::StrCat(epoch)},
                               {"step", absl::StrCat(first.ready.spec.step)},
                               {"fused_tensors", absl::StrCat(group.members.size())}};
  Timeline& t = *options_.timeline;
  for (size_t i : group.members) {
    const std::string& name = items[i].ready.spec.name;
    t.Span(name, op, start, end_ns, args);
    t.Span(name, phases[0], start, xs);
    t.Span(name, phases[1], xs, xe);
    t.Span(name, phases[2], xe, end_ns);
  }
  t.Counter("theta", start, {{"theta", absl::StrFormat("%g", theta)}});
  t.Counter("decision_epoch", start, {{"epoch", absl::StrCat(epoch)}});
}

absl::StatusOr<collectives::Communicator*> Executor::CommFor(const TensorSpec& spec) {
  if (spec.process_set.empty()) return job_comm_;
  const std::vector<int> nodes = ProcessSetNodes(spec, options_.layout);
  auto it = subsets_.find(nodes);
  if (it == subsets_.end()) {
    ASSIGN_OR_RETURN(std::unique_ptr<collectives::Communicator> sub, job_comm_->Subset(nodes));
    it = subsets_.emplace(nodes, std::move(sub)).first;
  }
  return it->second.get();
}

absl::Status Executor::Run(const Group& group, std::vector<WorkItem>& items,
                           std::vector<TensorResult>* results) {
  // A process set's group runs on the communicator of the nodes holding its ranks (every member
  // node runs the same groups in the same order), its average divided by the set's size.
  const TensorSpec& first = items[group.members.front()].ready.spec;
  ASSIGN_OR_RETURN(comm_, CommFor(first));
  set_size_ = first.process_set.empty() ? 0 : ProcessSetSize(first, options_.layout);
  set_nodes_ = ProcessSetNodes(first, options_.layout);
  return RunOnSet(group, items, results);
}

absl::Status Executor::RunOnSet(const Group& group, std::vector<WorkItem>& items,
                                std::vector<TensorResult>* results) {
  timing_ = GroupTiming{.start_ns = absl::GetCurrentTimeNanos()};
  for (size_t i : group.members) {
    TensorResult& r = (*results)[i];
    r.decision_epoch = items[i].ready.decision.epoch;
    r.theta = 1.0;
    const TensorSpec& spec = items[i].ready.spec;
    StepStats* st = StatsFor(items[i]);
    if (st != nullptr && spec.kind == CollectiveKind::kAllreduce) {
      st->stats.bytes_dense +=
          RingBytes(Elements(spec.shape) * DataTypeSize(spec.dtype), comm_->size());
    }
  }
  absl::Status status;
  switch (group.mode) {
    case GroupMode::kDenseAllreduce:
      if (RunsOnDevice(group, items)) {
        status = RunDenseOnDevice(group, items, results);
        if (status.ok()) SayDeviceStep("dense_allreduce");
      } else {
        status = RunDense(group, items, results);
      }
      LogGroup(group, items, 1.0, "dense_allreduce");
      return status;
    case GroupMode::kSparseAllreduce:
      if (RunsOnDevice(group, items)) {
        status = RunSparseOnDevice(group, items, results);
        if (status.ok()) SayDeviceStep("sparse_allgather");
      } else {
        status = RunSparse(group, items, results);
      }
      LogGroup(group, items, group.theta, "sparse_allgather");
      return status;
    case GroupMode::kAllgather:
      status = RunAllgather(items[group.members[0]], &(*results)[group.members[0]]);
      LogGroup(group, items, 1.0, "allgather");
      return status;
    case GroupMode::kBroadcast:
      status = RunBroadcast(items[group.members[0]], &(*results)[group.members[0]]);
      LogGroup(group, items, 1.0, "broadcast");
      return status;
  }
  return absl::InternalError("engine: unknown group mode");
}

absl::Status Executor::RunDense(const Group& group, std::vector<WorkItem>& items,
                                std::vector<TensorResult>* results) {
  const TensorSpec& first = items[group.members.front()].ready.spec;
  const DataType type = first.dtype;
  const size_t elem = DataTypeSize(type);
  size_t total = 0;
  for (size_t i : group.members) total += Bytes(items[i]);
  std::vector<uint8_t> buffer(total);
  const std::vector<absl::Status> staged = StageDense(
      group, items,
      [&](const WorkItem& item, const Compensated& c, size_t offset) {
        return CopyP(item, c, buffer.data() + offset, Bytes(item));
      },
      // g as is (host memory); a sum that cannot be copied out of device memory is sent as zeros
      // (the buffer's) and fails the tensor here.
      [&](const WorkItem& item, size_t offset) {
        absl::Status s = HostData(item);
        const std::vector<uint8_t>& g = item.tensor->data;
        if (s.ok() && !g.empty()) std::memcpy(buffer.data() + offset, g.data(), g.size());
        return s;
      });
  MarkExchange(true);
  RETURN_IF_ERROR(TimedCollective(options_.metrics, CollectiveOp::kDenseAllreduce, [&] {
    return comm_->Allreduce(buffer.data(), buffer.data(), total / elem, type,
                            collectives::ReduceOp::kSum);
  }));
  MarkExchange(false);

  if (options_.metrics) {
    options_.metrics->AddSentBytes(BytesKind::kDense, RingBytes(total, comm_->size()));
  }
  size_t offset = 0;
  for (size_t m = 0; m < group.members.size(); ++m) {
    const size_t i = group.members[m];
    TensorResult& r = (*results)[i];
    const size_t bytes = Bytes(items[i]);
    if (!staged[m].ok()) {
      r.status = staged[m];
      r.collective = "dense_allreduce";
      offset += bytes;
      continue;
    }
    r.data.assign(buffer.begin() + offset, buffer.begin() + offset + bytes);
    if (items[i].ready.spec.reduce_op == collectives::ReduceOp::kAverage) {
      collectives::DivideInPlace(type, r.data.data(), bytes / elem, world_size());
    }
    r.collective = "dense_allreduce";
    offset += bytes;
  }
  return absl::OkStatus();
}

std::vector<absl::Status> Executor::StageDense(
    const Group& group, std::vector<WorkItem>& items,
    absl::FunctionRef<absl::Status(const WorkItem&, const Compensated&, size_t offset)> stage_p,
    absl::FunctionRef<absl::Status(const WorkItem&, size_t offset)> stage_g) {
  std::vector<absl::Status> staged(group.members.size());
  size_t offset = 0;
  for (size_t m = 0; m < group.members.size(); ++m) {
    WorkItem& item = items[group.members[m]];
    if (Compressible(item.ready.spec, compressor_.get())) {
      // A dense step of a compressed tensor sends p = g + e and clears e.
      Compensated& c = compensated_;
      absl::Status s = Compensate(item, &c);
      if (s.ok()) s = stage_p(item, c, offset);
      if (s.ok()) s = ClearResidual(item, c);
      if (s.ok()) {
        AddNorms(item, c);
      } else {
        // Non-finite input: sent as is (the sum carries the NaN to every node), residual kept.
        StatsFor(item);
        staged[m] = stage_g(item, offset);
      }
    } else {
      StatsFor(item);
      staged[m] = stage_g(item, offset);
    }
    const size_t bytes = Bytes(item);
    if (StepStats* st = StatsFor(item)) st->stats.bytes_sent += RingBytes(bytes, comm_->size());
    offset += bytes;
  }
  return staged;
}

absl::Status Executor::PrepareSent(const WorkItem& item, double theta, SparseMember* m) {
  Compensated* c = &m->c;
  m->sent = nullptr;
  m->sent_level = Level::kMin;
  m->pending = PendingLevel::kNone;
  m->sent_on_device = false;
  RETURN_IF_ERROR(CompensateP(item, c));
  return SelectSent(item, theta, m);
}

absl::Status Executor::SelectSent(const WorkItem& item, double theta, SparseMember* m) {
  Compensated* c = &m->c;
  const double theta_min = options_.job.theta_min, theta_c = item.ready.decision.theta_candidate;
  const bool multi_level = theta_c >= theta_min && theta_min >= 1.0;
  // On the CPU backend the levels lie in host memory already: the sent one is encoded from there
  // (SentFromBackend), θ_c's is selected from θ_min's there (CandidateFromMin), and no level is
  // copied out.
  const bool in_host_backend = backend_ != nullptr && !c->on_device;
  // Only the level that is sent is computed before the send; the other one (and both norms) is
  // computed while the message is on the wire. Sending θ_c first needs a compressor whose second
  // level equals compressing p directly (topk, randomk).
  if (multi_level && theta == theta_min) {
    m->pending = PendingLevel::kCandidate;
    if (in_host_backend) {
      RETURN_IF_ERROR(Select(item, *c, Level::kMin, theta_min, nullptr));
      return SentFromBackend(item, Level::kMin, m);
    }
    RETURN_IF_ERROR(Select(item, *c, Level::kMin, theta_min, &c->levels.at_min));
    return SentFrom(&c->levels.at_min, Level::kMin, m);
  }
  if (multi_level && theta == theta_c && compressor_->SecondLevelEqualsDirect()) {
    m->pending = PendingLevel::kMin;
    if (in_host_backend) {
      RETURN_IF_ERROR(Select(item, *c, Level::kCandidate, theta_c, nullptr));
      return SentFromBackend(item, Level::kCandidate, m);
    }
    RETURN_IF_ERROR(Select(item, *c, Level::kCandidate, theta_c, &c->levels.at_candidate));
    return SentFrom(&c->levels.at_candidate, Level::kCandidate, m);
  }
  // Both levels are needed before the send. On a device backend, and on the CPU backend when the
  // candidate is not nested in θ_min's level, both are selected from p and their norms taken
  // where they lie; a device backend's sent message is copied out below.
  const bool levels_in_backend = c->on_device || (in_host_backend && !multi_level);
  if (levels_in_backend) {
    RETURN_IF_ERROR(LevelsOnDevice(item, c, true, true));
  } else {
    RETURN_IF_ERROR(
        Select(item, *c, Level::kMin, theta_min, in_host_backend ? nullptr : &c->levels.at_min));
    if (multi_level) {
      RETURN_IF_ERROR(CandidateFromMin(item, c));
    } else {
      RETURN_IF_ERROR(
          Select(item, *c, Level::kCandidate, std::max(1.0, theta_c), &c->levels.at_candidate));
      c->levels.norm_min = kernels::L2Norm(c->levels.at_min);
      c->levels.norm_candidate = kernels::L2Norm(c->levels.at_candidate);
    }
  }
  const std::string& name = item.ready.spec.name;
  Level level = Level::kCandidate;
  kernels::Compressed* copy = &m->other;
  if (theta == theta_min) {
    level = Level::kMin;
    copy = &c->levels.at_min;
  } else if (theta == theta_c) {
    copy = &c->levels.at_candidate;
  } else {
    // The candidate's message on the backend is not needed any more (its norm is taken): the
    // level sent at this θ takes its place.
    RETURN_IF_ERROR(Select(item, *c, Level::kCandidate, theta, in_host_backend ? nullptr : copy));
    if (in_host_backend) return SentFromBackend(item, level, m);
    return SentFrom(copy, level, m);
  }
  if (in_host_backend && (level == Level::kMin || levels_in_backend)) {
    return SentFromBackend(item, level, m);
  }
  if (c->on_device) RETURN_IF_ERROR(backend_->CopyMessage(name, level, copy));
  return SentFrom(copy, level, m);
}

absl::Status Executor::SentFrom(const kernels::Compressed* copy, Level level, SparseMember* m) {
  m->sent = copy;
  m->sent_level = level;
  m->wire = kernels::ViewOf(*copy);
  return absl::OkStatus();
}

absl::Status Executor::SentFromBackend(const WorkItem& item, Level level, SparseMember* m) {
  ASSIGN_OR_RETURN(m->wire, backend_->HostMessage(item.ready.spec.name, level));
  m->sent = &m->other;  // stands for the backend's message in Commit (which reads that)
  m->sent_level = level;
  return absl::OkStatus();
}

absl::Status Executor::FinishSent(const WorkItem& item, SparseMember* m) {
  Compensated* c = &m->c;
  const std::string& name = item.ready.spec.name;
  // The remaining level first (θ_min's reads p, which the commit turns into the residual).
  absl::Status levels;
  switch (m->pending) {
    case PendingLevel::kNone:
      break;
    case PendingLevel::kCandidate:
      levels = c->on_device ? LevelsOnDevice(item, c, false, true) : CandidateFromMin(item, c);
      break;
    case PendingLevel::kMin:
      if (c->on_device) {
        levels = LevelsOnDevice(item, c, true, false);
        break;
      }
      if (backend_ != nullptr) {
        // Neither level is copied out: both norms are taken where the levels lie.
        levels = backend_->Select(name, Level::kMin, options_.job.theta_min, nullptr);
        absl::StatusOr<double> norm_min = levels.ok() ? backend_->Norm(name, Level::kMin) : 0.0;
        absl::StatusOr<double> norm_c = levels.ok() ? backend_->Norm(name, Level::kCandidate) : 0.0;
        if (levels.ok()) levels = norm_min.status();
        if (levels.ok()) levels = norm_c.status();
        if (levels.ok()) {
          c->levels.norm_min = *norm_min;
          c->levels.norm_candidate = *norm_c;
        }
      } else {
        levels = Select(item, *c, Level::kMin, options_.job.theta_min, &c->levels.at_min);
        if (levels.ok()) {
          c->levels.norm_min = kernels::L2Norm(c->levels.at_min);
          c->levels.norm_candidate = kernels::L2Norm(c->levels.at_candidate);
        }
      }
      break;
  }
  // What was sent becomes the residual whatever happened above: it is on the wire.
  RETURN_IF_ERROR(Commit(item, *c, *m->sent, m->sent_level));
  RETURN_IF_ERROR(levels);
  AddNorms(item, *c);
  return absl::OkStatus();
}

absl::Status Executor::RunSparse(const Group& group, std::vector<WorkItem>& items,
                                 std::vector<TensorResult>* results) {
  const size_t count = group.members.size();
  if (members_.size() < count) members_.resize(count);
  // Payload: per member, u8 ok, then the wire encoding (u64 size + bytes) or an error string.
  std::vector<uint8_t>& payload = payload_;
  payload.clear();
  ByteWriter w(&payload);
  std::vector<std::string> errors(count);
  for (size_t m = 0; m < count; ++m) {
    WorkItem& item = items[group.members[m]];
    SparseMember& member = members_[m];
    absl::Status status = PrepareSent(item, group.theta, &member);
    const size_t at = payload.size();
    if (status.ok()) {
      // u8 1, u64 size, then the encoding straight into the payload; the size is written after.
      w.Put<uint8_t>(1);
      w.Put<uint64_t>(0);
      status = kernels::EncodeAppend(member.wire, &payload);
      if (status.ok()) {
        const uint64_t size = payload.size() - at - 1 - sizeof(uint64_t);
        std::memcpy(payload.data() + at + 1, &size, sizeof(size));
      } else {
        payload.resize(at);
      }
    }
    member.status = status;
    if (!status.ok()) {
      member.sent = nullptr;  // nothing sent: the residual stays as it was
      w.Put<uint8_t>(0);
      w.PutString(std::string(status.message()));
      StatsFor(item);
    }
    if (StepStats* st = StatsFor(item)) st->stats.theta_used = group.theta;
  }

  // The collective runs on exchange_ while this thread commits the residuals, computes the
  // statistics' levels and norms, and sums its own contribution (BackgroundCall's ordering makes
  // the payload visible to the exchange and recv / sizes visible here after Wait).
  std::vector<uint8_t>& recv = recv_;
  std::vector<size_t>& sizes = sizes_;
  auto exchange = [this, &payload, &recv, &sizes] {
    absl::Status s = TimedCollective(options_.metrics, CollectiveOp::kSparseAllgather, [&] {
      return comm_->AllgathervAnySize(payload, &recv, &sizes);
    });
    MarkExchange(false);
    return s;
  };
  const bool overlap = payload.size() >= kOverlapMinBytes;
  MarkExchange(true);
  absl::Status exchanged;
  if (overlap) {
    exchange_.Start(exchange);
  } else {
    exchanged = exchange();
  }

  for (size_t m = 0; m < count; ++m) {
    SparseMember& member = members_[m];
    if (!member.status.ok()) continue;
    if (absl::Status s = FinishSent(items[group.members[m]], &member); !s.ok()) {
      errors[m] = absl::StrFormat("tensor '%s': %s", items[group.members[m]].ready.spec.name,
                                  s.message());
    }
  }
  // Each member's sum goes into its own input buffer (in memory already, and its gradient is no
  // longer needed: the compensation above consumed it), which then becomes the result.
  std::vector<absl::Span<float>> sums(count);
  for (size_t m = 0; m < count; ++m) {
    std::vector<uint8_t>& data = items[group.members[m]].tensor->data;
    data.assign(Bytes(items[group.members[m]]), uint8_t{0});  // empty for a device sum
    sums[m] = absl::MakeSpan(reinterpret_cast<float*>(data.data()), data.size() / sizeof(float));
  }
  // Adds node n's block to the sums. Every node adds the blocks in node order, so the sums are
  // bit-identical everywhere; a node of rank 0 or 1 may add its own block first, since the first
  // two additions into a zero sum commute exactly.
  auto add_block = [&](int n, absl::Span<const uint8_t> block) {
    ByteReader r(block);
    const int nodes[] = {n};
    for (size_t m = 0; m < count; ++m) {
      const std::string& name = items[group.members[m]].ready.spec.name;
      const uint8_t ok = r.Get<uint8_t>();
      absl::Status status;
      if (!r.ok()) {
        status = absl::DataLossError("truncated exchange payload");
      } else if (ok == 0) {
        status = absl::InvalidArgumentError(r.GetString());
      } else {
        const uint64_t size = r.Get<uint64_t>();
        status = kernels::DecodeAdd(r.GetBytes(size), 1.0f, sums[m]);
      }
      if (!status.ok() && errors[m].empty()) {
        errors[m] = absl::StrFormat("tensor '%s': ranks %s: %s", name,
                                    FormatRanks(options_.layout, nodes), status.message());
      }
    }
  };
  const int me = comm_->rank();
  const bool own_first = me <= 1;
  if (own_first) add_block(me, payload);

  if (overlap) exchanged = exchange_.Wait();
  RETURN_IF_ERROR(exchanged);

  const int p = comm_->size();
  const int64_t sent_bytes =
      p <= 1 ? 0 : static_cast<int64_t>(recv.size() - sizes[(me + 1) % p]);
  if (options_.metrics) options_.metrics->AddSentBytes(BytesKind::kSparse, sent_bytes);
  if (StepStats* st = StatsFor(items[group.members.front()])) st->stats.bytes_sent += sent_bytes;

  size_t offset = 0;
  for (int n = 0; n < p; ++n) {
    const auto block = absl::MakeConstSpan(recv).subspan(offset, sizes[n]);
    offset += sizes[n];
    if (n == me && own_first) continue;
    add_block(n, block);
  }
  const int world = world_size();
  for (size_t m = 0; m < count; ++m) {
    const size_t i = group.members[m];
    TensorResult& r = (*results)[i];
    r.collective = "sparse_allgather";
    r.theta = group.theta;
    if (!errors[m].empty()) {
      r.status = absl::InvalidArgumentError(errors[m]);
      continue;
    }
    if (items[i].ready.spec.reduce_op == collectives::ReduceOp::kAverage) {
      kernels::cpu::DivideAll(sums[m], static_cast<float>(world));
    }
    r.data = std::move(items[i].tensor->data);
  }
  return absl::OkStatus();
}

absl::Status Executor::RunAllgather(WorkItem& item, TensorResult* result) {
  std::vector<uint8_t> payload;
  ByteWriter w(&payload);
  w.Put<uint32_t>(static_cast<uint32_t>(item.tensor->first_dims.size()));
  for (int64_t d : item.tensor->first_dims) w.Put<int64_t>(d);
  w.PutBytes(item.tensor->data.data(), item.tensor->data.size());
  std::vector<uint8_t> recv;
  std::vector<size_t> sizes;
  MarkExchange(true);
  RETURN_IF_ERROR(TimedCollective(options_.metrics, CollectiveOp::kAllgather, [&] {
    return comm_->AllgathervAnySize(payload, &recv, &sizes);
  }));
  MarkExchange(false);

  if (options_.metrics && comm_->size() > 1) {  // every block but the right neighbour's
    options_.metrics->AddSentBytes(BytesKind::kDense,
                                   recv.size() - sizes[(comm_->rank() + 1) % comm_->size()]);
  }
  result->collective = "allgather";
  size_t offset = 0;
  for (size_t n = 0; n < sizes.size(); ++n) {
    ByteReader r(absl::MakeConstSpan(recv).subspan(offset, sizes[n]));
    offset += sizes[n];
    const uint32_t count = r.Get<uint32_t>();
    for (uint32_t j = 0; j < count && r.ok(); ++j) result->first_dims.push_back(r.Get<int64_t>());
    const size_t header = 4 + 8 * static_cast<size_t>(count);
    if (!r.ok() || sizes[n] < header) {
      const int nodes[] = {set_nodes_[n]};
      result->status = absl::DataLossError(
          absl::StrFormat("tensor '%s': ranks %s: malformed allgather block", item.ready.spec.name,
                          FormatRanks(options_.layout, nodes)));
      result->first_dims.clear();
      return absl::OkStatus();
    }
    absl::Span<const uint8_t> data = r.GetBytes(sizes[n] - header);
    result->data.insert(result->data.end(), data.begin(), data.end());
  }
  return absl::OkStatus();
}

absl::Status Executor::RunBroadcast(WorkItem& item, TensorResult* result) {
  const int root = item.ready.spec.root_rank;
  int root_node = -1;
  for (size_t n = 0; n < set_nodes_.size(); ++n) {  // the root's position in the communicator
    const NodeLayout& l = options_.layout[set_nodes_[n]];
    if (root >= l.first_rank && root < l.first_rank + l.local_count)
      root_node = static_cast<int>(n);
  }
  result->collective = "broadcast";
  if (root_node < 0) {
    result->status = absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': root_rank %d is not a rank of the job (world size %d)",
                        item.ready.spec.name, root, world_size()));
    return absl::OkStatus();
  }
  result->data = std::move(item.tensor->data);
  MarkExchange(true);
  RETURN_IF_ERROR(TimedCollective(options_.metrics, CollectiveOp::kBroadcast, [&] {
    return comm_->Broadcast(result->data.data(), result->data.size(), root_node);
  }));
  MarkExchange(false);

  // The ring's end (the root's left neighbour) forwards nothing.
  if (options_.metrics && (comm_->rank() + 1) % comm_->size() != root_node) {
    options_.metrics->AddSentBytes(BytesKind::kDense, result->data.size());
  }
  return absl::OkStatus();
}

}  // namespace gravac::daemon::internal

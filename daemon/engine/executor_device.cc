// The Executor's device step (executor.h, "Device step"): a group's cross-node exchange over the
// job's DeviceCollectives (gravacd's nccl ones), the data in device memory of the collectives'
// CUDA device, on the compression backend of that device. Results and residuals are the host
// path's (RunDense, RunSparse) bit for bit, given collectives that sum in the same order (the
// HostDeviceCollectives do; NCCL's own order is its own).
#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "daemon/engine/executor.h"
#include "daemon/engine/fusion_plan.h"
#include "daemon/engine/negotiation.h"

namespace gravac::daemon::internal {
namespace {

using collectives::DataType;

// Ring allreduce: each rank sends 2(P-1)/P of the buffer (as executor.cc counts it).
int64_t RingBytes(int64_t bytes, int p) { return p <= 1 ? 0 : bytes * 2 * (p - 1) / p; }

// A node's block of the sparse exchange: one int64 header per member, in member order, then per
// member its payload: k >= 0 (header k): k int32 indices, then k fp32 values; an error (header
// -1 - L): the error's L bytes, padded to a multiple of 8. Every payload keeps the next one
// 4-byte aligned for the kernels.
constexpr size_t kHeaderBytes = sizeof(int64_t);
size_t Pad8(size_t bytes) { return (bytes + 7) / 8 * 8; }
size_t PayloadBytes(int64_t header) {
  if (header >= 0) return static_cast<size_t>(header) * (sizeof(int32_t) + sizeof(float));
  return Pad8(static_cast<size_t>(-(header + 1)));
}

}  // namespace

void Executor::SayHostPath(const std::string& why) {
  if (!said_host_path_.insert(why).second || options_.log == nullptr) return;
  GRAVAC_LOG(*options_.log, kInfo,
             "device collectives (%s): %s run over the host data plane (said once)",
             options_.device_collectives->name(), why);
}

void Executor::SayDeviceStep(std::string_view collective) {
  if (said_device_step_ || options_.log == nullptr) return;
  said_device_step_ = true;
  GRAVAC_LOG(*options_.log, kInfo,
             "device step: %s collectives on CUDA device %d (first group: %s, its data in device "
             "memory; said once)",
             options_.device_collectives->name(), options_.device_collectives->device(),
             collective);
}

bool Executor::RunsOnDevice(const Group& group, const std::vector<WorkItem>& items) {
  const collectives::DeviceCollectives* dc = options_.device_collectives;
  if (dc == nullptr || dc->memory_type() != MemoryType::kDevice) return false;
  // Only what every node agrees on decides (the specs are agreed, the compressor is the job's),
  // so every node takes the same path; where a node's data lies decides only how it is staged.
  if (group.mode != GroupMode::kDenseAllreduce && group.mode != GroupMode::kSparseAllreduce) {
    SayHostPath("allgathers and broadcasts");
    return false;
  }
  if (group.mode == GroupMode::kSparseAllreduce && backend_ == nullptr) {
    SayHostPath(
        absl::StrFormat("sparse groups of the '%s' compressor (the device step runs topk "
                        "with fp32 values on the compression backend)",
                        compressor_ != nullptr ? compressor_->name() : "none"));
    return false;
  }
  for (size_t i : group.members) {
    const TensorSpec& s = items[i].ready.spec;
    if (!s.process_set.empty()) {
      SayHostPath("process sets' groups");
      return false;
    }
    if (s.kind != CollectiveKind::kAllreduce || s.dtype != DataType::kFloat32) {
      SayHostPath("allreduces of other types than fp32");
      return false;
    }
    if (s.memory != MemoryType::kDevice) {
      SayHostPath("groups with tensors in host memory");
      return false;
    }
  }
  return true;
}

absl::StatusOr<kernels::CompressionBackend*> Executor::DeviceStepBackend() {
  const int device = options_.device_collectives->device();
  if (backend_ != nullptr) {
    if (kernels::CompressionBackend* b = backend_->DeviceBackend(device)) return b;
    return absl::FailedPreconditionError(absl::StrFormat(
        "engine: the %s device collectives are on CUDA device %d, which has no compression "
        "backend for the device step",
        options_.device_collectives->name(), device));
  }
  if (own_device_backend_ == nullptr) {
    absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> made =
        options_.device_backends != nullptr ? options_.device_backends(device)
                                            : kernels::MakeDeviceBackend(device);
    if (!made.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "engine: the %s device collectives are on CUDA device %d, which has no compression "
          "backend for the device step: %s",
          options_.device_collectives->name(), device, made.status().message()));
    }
    own_device_backend_ = *std::move(made);
  }
  return own_device_backend_.get();
}

absl::StatusOr<uint8_t*> Executor::DeviceScratch(kernels::CompressionBackend* dev,
                                                 std::unique_ptr<kernels::BackendMemory>* slot,
                                                 size_t bytes) {
  if (*slot == nullptr || (*slot)->bytes() < bytes) {
    slot->reset();
    ASSIGN_OR_RETURN(*slot, dev->Allocate(std::max<size_t>(bytes, 8)));
  }
  return static_cast<uint8_t*>((*slot)->data());
}

absl::Status Executor::StageHost(kernels::CompressionBackend* dev, uint8_t* dst, const void* host,
                                 size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return dev->CopyFromHost(dst, host, bytes);
}

absl::Status Executor::StageG(const WorkItem& item, kernels::CompressionBackend* dev,
                              uint8_t* dst) {
  const NodeTensor& t = *item.tensor;
  const size_t bytes = Bytes(item);
  if (t.device_data != nullptr && t.device_data->device() == dev->device()) {
    return dev->CopyWithin(dst, t.device_data->data(), bytes);
  }
  absl::Status s = HostData(item);
  if (s.ok()) s = StageHost(dev, dst, t.data.data(), bytes);
  if (!s.ok()) {
    // As the host path: the tensor fails here and zeros go into the sum.
    RETURN_IF_ERROR(dev->Zero(dst, bytes));
  }
  return s;
}

absl::Status Executor::StageP(const WorkItem& item, const Compensated& c,
                              kernels::CompressionBackend* dev, uint8_t* dst) {
  const size_t bytes = Bytes(item);
  if (c.on_device) {
    const std::string& name = item.ready.spec.name;
    ASSIGN_OR_RETURN(kernels::CompressionBackend * held, backend_->TensorBackend(name));
    if (held == dev) {
      ASSIGN_OR_RETURN(const float* p, backend_->P(name));
      return dev->CopyWithin(dst, p, bytes);
    }
  }
  std::vector<uint8_t>& host = host_scratch_;
  host.resize(bytes);
  RETURN_IF_ERROR(CopyP(item, c, host.data(), bytes));
  return StageHost(dev, dst, host.data(), bytes);
}

DeviceResults* Executor::DeviceResultsOn(kernels::CompressionBackend* dev) {
  if (device_results_ != nullptr && device_results_->device() == dev->device()) {
    return device_results_.get();
  }
  if (!said_host_path_.insert(absl::StrFormat("results on %d", dev->device())).second) {
    return nullptr;  // refused before (a pool, once made, is returned above)
  }
  absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> made =
      options_.device_backends != nullptr ? options_.device_backends(dev->device())
                                          : kernels::MakeDeviceBackend(dev->device());
  if (!made.ok()) {
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kWarning,
                 "device collectives (%s): results go back to the workers through host memory: "
                 "no backend for their buffers on CUDA device %d: %s (said once)",
                 options_.device_collectives->name(), dev->device(), made.status().message());
    }
    return nullptr;
  }
  device_results_ = std::make_unique<DeviceResults>(*std::move(made));
  return device_results_.get();
}

absl::Status Executor::TakeResult(const WorkItem& item, kernels::CompressionBackend* dev,
                                  size_t bytes,
                                  absl::FunctionRef<absl::StatusOr<uint8_t*>()> scratch,
                                  absl::FunctionRef<absl::Status(void*)> build,
                                  std::vector<uint8_t>* host, TensorResult* r, bool* queued) {
  if (item.tensor->device == dev->device()) {
    if (DeviceResults* pool = DeviceResultsOn(dev)) {
      ASSIGN_OR_RETURN(r->device_data, pool->Build(*dev, bytes, [&](void* out) {
        absl::Status s = build(out);
        // A failed build's buffer goes back to the pool at once: what it queued
        // there must have finished before anyone takes it again.
        if (!s.ok()) (void)dev->Synchronize();
        return s;
      }));
      r->data.clear();
      *queued = true;
      return absl::OkStatus();
    }
  }
  ASSIGN_OR_RETURN(uint8_t * at, scratch());
  RETURN_IF_ERROR(build(at));
  host->resize(bytes);
  if (bytes > 0) RETURN_IF_ERROR(dev->CopyToHost(host->data(), at, bytes));
  if (host != &r->data) r->data = std::move(*host);
  return absl::OkStatus();
}

void Executor::FailSum(const WorkItem& item, const kernels::CompressionBackend& dev,
                       const absl::Status& s, TensorResult* r) {
  r->data.clear();
  r->device_data.reset();
  r->status =
      absl::Status(s.code(), absl::StrFormat("tensor '%s': the sum on CUDA device %d: %s",
                                             item.ready.spec.name, dev.device(), s.message()));
}

void Executor::FinishResults(const Group& group, const std::vector<WorkItem>& items,
                             kernels::CompressionBackend* dev, bool queued,
                             std::vector<TensorResult>* results) {
  if (!queued) return;
  const absl::Status s = dev->Synchronize();
  if (s.ok()) return;
  for (size_t i : group.members) {
    TensorResult& r = (*results)[i];
    if (r.device_data == nullptr) continue;
    r.device_data.reset();
    r.status = absl::Status(s.code(),
                            absl::StrFormat("tensor '%s': the result on CUDA device %d: %s",
                                            items[i].ready.spec.name, dev->device(), s.message()));
  }
}

absl::Status Executor::RunDenseOnDevice(const Group& group, std::vector<WorkItem>& items,
                                        std::vector<TensorResult>* results) {
  collectives::DeviceCollectives& dc = *options_.device_collectives;
  ASSIGN_OR_RETURN(kernels::CompressionBackend * dev, DeviceStepBackend());
  size_t total = 0;
  for (size_t i : group.members) total += Bytes(items[i]);
  ASSIGN_OR_RETURN(uint8_t * buffer, DeviceScratch(dev, &device_buffer_, total));
  // RunDense's staging into device memory: copied within the device where p or g lies there.
  const std::vector<absl::Status> staged = StageDense(
      group, items,
      [&](const WorkItem& item, const Compensated& c, size_t offset) {
        return StageP(item, c, dev, buffer + offset);
      },
      [&](const WorkItem& item, size_t offset) { return StageG(item, dev, buffer + offset); });
  // The collectives' stream must see the staged buffer: the backend's queued copies first.
  RETURN_IF_ERROR(dev->Synchronize());
  MarkExchange(true);
  RETURN_IF_ERROR(TimedCollective(options_.metrics, CollectiveOp::kDenseAllreduce, [&] {
    RETURN_IF_ERROR(dc.AllreduceSum(reinterpret_cast<float*>(buffer), total / sizeof(float)));
    return dc.Wait(options_.device_timeout);
  }));
  MarkExchange(false);

  if (options_.metrics) {
    options_.metrics->AddSentBytes(BytesKind::kDense, RingBytes(total, comm_->size()));
  }
  size_t offset = 0;
  bool queued = false;  // a result handed in device memory (TakeResult)
  for (size_t m = 0; m < group.members.size(); ++m) {
    const size_t i = group.members[m];
    TensorResult& r = (*results)[i];
    const size_t bytes = Bytes(items[i]);
    r.collective = "dense_allreduce";
    uint8_t* sum_bytes = buffer + offset;
    auto* sum = reinterpret_cast<float*>(sum_bytes);
    offset += bytes;
    if (!staged[m].ok()) {
      r.status = staged[m];
      continue;
    }
    absl::Status s;
    if (items[i].ready.spec.reduce_op == collectives::ReduceOp::kAverage) {
      s = dev->DivideAll(sum, static_cast<int64_t>(bytes / sizeof(float)),
                         static_cast<float>(world_size()));
    }
    if (s.ok()) {
      // Out of the fused buffer (which the next group reuses) into a result buffer of its own,
      // or to the host straight from it.
      s = TakeResult(
          items[i], dev, bytes, [&]() -> absl::StatusOr<uint8_t*> { return sum_bytes; },
          [&](void* out) {
            return out == sum_bytes || bytes == 0 ? absl::OkStatus()
                                                  : dev->CopyWithin(out, sum_bytes, bytes);
          },
          &r.data, &r, &queued);
    }
    if (!s.ok()) FailSum(items[i], *dev, s, &r);
  }
  FinishResults(group, items, dev, queued, results);
  return absl::OkStatus();
}

absl::Status Executor::PrepareSentOnDevice(const WorkItem& item, double theta, SparseMember* m) {
  Compensated* c = &m->c;
  m->sent = nullptr;
  m->sent_level = Level::kMin;
  m->pending = PendingLevel::kNone;
  m->sent_on_device = false;
  RETURN_IF_ERROR(CompensateP(item, c));
  const std::string& name = item.ready.spec.name;
  ASSIGN_OR_RETURN(kernels::CompressionBackend * dev, DeviceStepBackend());
  bool here = false;
  if (c->on_device) {
    ASSIGN_OR_RETURN(kernels::CompressionBackend * held, backend_->TensorBackend(name));
    here = held == dev;
  }
  // Elsewhere (the CPU backend, another device): the host path's messages, staged below.
  if (!here) return SelectSent(item, theta, m);
  // PrepareSent's levels, every message left on the device (Select with out = nullptr).
  const double theta_min = options_.job.theta_min, theta_c = item.ready.decision.theta_candidate;
  const bool multi_level = theta_c >= theta_min && theta_min >= 1.0;
  m->sent_on_device = true;
  m->sent = &m->other;  // stands for the backend's message in Commit (which reads that)
  if (multi_level && theta == theta_min) {
    RETURN_IF_ERROR(backend_->Select(name, Level::kMin, theta_min, nullptr));
    m->pending = PendingLevel::kCandidate;
    return absl::OkStatus();
  }
  if (multi_level && theta == theta_c && compressor_->SecondLevelEqualsDirect()) {
    RETURN_IF_ERROR(backend_->Select(name, Level::kCandidate, theta_c, nullptr));
    m->sent_level = Level::kCandidate;
    m->pending = PendingLevel::kMin;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(LevelsOnDevice(item, c, true, true));
  if (theta == theta_min) return absl::OkStatus();
  m->sent_level = Level::kCandidate;
  if (theta == theta_c) return absl::OkStatus();
  // Neither: the level sent at this θ takes the candidate's place (its norm is taken already).
  return backend_->Select(name, Level::kCandidate, theta, nullptr);
}

absl::Status Executor::RunSparseOnDevice(const Group& group, std::vector<WorkItem>& items,
                                         std::vector<TensorResult>* results) {
  collectives::DeviceCollectives& dc = *options_.device_collectives;
  ASSIGN_OR_RETURN(kernels::CompressionBackend * dev, DeviceStepBackend());
  const size_t count = group.members.size();
  if (members_.size() < count) members_.resize(count);
  std::vector<int64_t>& headers = device_headers_;
  headers.assign(count, 0);
  std::vector<std::string> errors(count), sent_errors(count);
  size_t block = count * kHeaderBytes;
  for (size_t m = 0; m < count; ++m) {
    WorkItem& item = items[group.members[m]];
    SparseMember& member = members_[m];
    absl::Status status = PrepareSentOnDevice(item, group.theta, &member);
    if (status.ok() && !member.sent_on_device &&
        (member.wire.dense || member.wire.implicit_indices ||
         member.wire.indices.size() != member.wire.values.size())) {
      status = absl::InternalError(absl::StrFormat(
          "tensor '%s': the device step sends sparse messages with explicit indices only",
          item.ready.spec.name));
    }
    if (status.ok() && member.sent_on_device) {
      ASSIGN_OR_RETURN(const kernels::TopKStep::Message msg,
                       backend_->Message(item.ready.spec.name, member.sent_level));
      headers[m] = msg.count;
    } else if (status.ok()) {
      headers[m] = member.wire.count();
    }
    member.status = status;
    if (!status.ok()) {
      member.sent = nullptr;  // nothing sent: the residual stays as it was
      sent_errors[m] = std::string(status.message());
      headers[m] = -1 - static_cast<int64_t>(sent_errors[m].size());
      StatsFor(item);
    }
    block += PayloadBytes(headers[m]);
    if (StepStats* st = StatsFor(item)) st->stats.theta_used = group.theta;
  }

  // This node's block in device memory: the headers, then each member's message (copied within
  // the device from the backend's level) or error.
  ASSIGN_OR_RETURN(uint8_t * send, DeviceScratch(dev, &device_send_, block));
  RETURN_IF_ERROR(StageHost(dev, send, headers.data(), count * kHeaderBytes));
  size_t at = count * kHeaderBytes;
  for (size_t m = 0; m < count; ++m) {
    const SparseMember& member = members_[m];
    const size_t payload = PayloadBytes(headers[m]);
    if (headers[m] < 0) {
      RETURN_IF_ERROR(dev->Zero(send + at, payload));
      RETURN_IF_ERROR(StageHost(dev, send + at, sent_errors[m].data(), sent_errors[m].size()));
    } else {
      const size_t k = static_cast<size_t>(headers[m]);
      uint8_t* indices = send + at;
      uint8_t* values = indices + k * sizeof(int32_t);
      if (member.sent_on_device) {
        ASSIGN_OR_RETURN(
            const kernels::TopKStep::Message msg,
            backend_->Message(items[group.members[m]].ready.spec.name, member.sent_level));
        RETURN_IF_ERROR(dev->CopyWithin(indices, msg.indices, k * sizeof(int32_t)));
        RETURN_IF_ERROR(dev->CopyWithin(values, msg.values, k * sizeof(float)));
      } else {
        RETURN_IF_ERROR(StageHost(dev, indices, member.wire.indices.data(), k * sizeof(int32_t)));
        RETURN_IF_ERROR(StageHost(dev, values, member.wire.values.data(), k * sizeof(float)));
      }
    }
    at += payload;
  }
  // The collectives' stream must see the block: the backend's queued copies first.
  RETURN_IF_ERROR(dev->Synchronize());

  // The gather runs (on the collectives' stream) while this thread commits the residuals and
  // computes the statistics' levels and norms (on the backend's).
  MarkExchange(true);
  const int64_t exchange_start = absl::GetCurrentTimeNanos();
  ASSIGN_OR_RETURN(const std::vector<size_t> sizes, dc.AgreeSizes(block, options_.device_timeout));
  size_t received = 0;
  for (size_t s : sizes) received += s;
  ASSIGN_OR_RETURN(uint8_t * recv, DeviceScratch(dev, &device_recv_, received));
  RETURN_IF_ERROR(dc.Allgatherv(send, recv, sizes));
  for (size_t m = 0; m < count; ++m) {
    SparseMember& member = members_[m];
    if (!member.status.ok()) continue;
    if (absl::Status s = FinishSent(items[group.members[m]], &member); !s.ok()) {
      errors[m] =
          absl::StrFormat("tensor '%s': %s", items[group.members[m]].ready.spec.name, s.message());
    }
  }
  RETURN_IF_ERROR(dc.Wait(options_.device_timeout));
  MarkExchange(false);
  if (options_.metrics != nullptr) {
    options_.metrics->ObserveCollective(CollectiveOp::kSparseAllgather, exchange_start,
                                        absl::GetCurrentTimeNanos());
  }

  const int p = dc.size(), me = dc.rank();
  if (static_cast<int>(sizes.size()) != p) {
    return absl::InternalError(
        absl::StrFormat("engine: the %s device collectives agreed %d sizes for %d ranks", dc.name(),
                        sizes.size(), p));
  }
  const int64_t sent_bytes = p <= 1 ? 0 : static_cast<int64_t>(received - sizes[(me + 1) % p]);
  if (options_.metrics) options_.metrics->AddSentBytes(BytesKind::kSparse, sent_bytes);
  if (StepStats* st = StatsFor(items[group.members.front()])) st->stats.bytes_sent += sent_bytes;

  // Every node's headers (one copy per node) and where each member's message lies in recv.
  struct Part {
    size_t offset = 0;   // in recv
    int64_t header = 0;  // as sent
  };
  std::vector<std::vector<Part>> parts(p, std::vector<Part>(count));
  std::vector<std::vector<std::string>> failed(p, std::vector<std::string>(count));
  std::vector<int64_t> node_headers(count);
  size_t base = 0;
  for (int n = 0; n < p; ++n) {
    const size_t size = sizes[n];
    size_t parsed = 0;  // members whose header and payload lie within the block
    if (size >= count * kHeaderBytes) {
      RETURN_IF_ERROR(dev->CopyToHost(node_headers.data(), recv + base, count * kHeaderBytes));
      size_t off = count * kHeaderBytes;
      for (; parsed < count; ++parsed) {
        const int64_t h = node_headers[parsed];
        const int64_t elements = Elements(items[group.members[parsed]].ready.spec.shape);
        if (h >= 0 ? h > elements : h < -(int64_t{1} << 30)) break;
        if (off + PayloadBytes(h) > size) break;
        parts[n][parsed] = {base + off, h};
        if (h < 0) {
          std::string message(static_cast<size_t>(-(h + 1)), '\0');
          if (!message.empty()) {
            RETURN_IF_ERROR(dev->CopyToHost(message.data(), recv + base + off, message.size()));
          }
          failed[n][parsed] = std::move(message);
        }
        off += PayloadBytes(h);
      }
    }
    for (size_t m = parsed; m < count; ++m) {
      parts[n][m].header = -1;
      failed[n][m] = "truncated or malformed device exchange block";
    }
    base += size;
  }
  // The errors in the host path's order (RunSparse): this node's own first on node ranks 0 and
  // 1, then the others in node order; the first error of a member is its result.
  auto note_errors = [&](int n) {
    const int nodes[] = {n};
    for (size_t m = 0; m < count; ++m) {
      if (parts[n][m].header >= 0 || !errors[m].empty()) continue;
      errors[m] =
          absl::StrFormat("tensor '%s': ranks %s: %s", items[group.members[m]].ready.spec.name,
                          FormatRanks(options_.layout, nodes), failed[n][m]);
    }
  };
  const bool own_first = me <= 1;
  if (own_first) note_errors(me);
  for (int n = 0; n < p; ++n) {
    if (n != me || !own_first) note_errors(n);
  }

  // Each member's sum on the device: zero, every node's message added in node order (so every
  // node's sum is bit-identical, and the host path's: its own-block-first rule only swaps the
  // first two additions into a zero sum, which commute exactly), the average's division there;
  // built straight in a buffer of its own, handed back in device memory, when the node's workers
  // are on this device (TakeResult), else in the step's scratch and copied to the host once, into
  // the tensor's input buffer, which becomes the result.
  const int world = world_size();
  bool queued = false;  // a result handed in device memory (TakeResult)
  for (size_t m = 0; m < count; ++m) {
    const size_t i = group.members[m];
    TensorResult& r = (*results)[i];
    r.collective = "sparse_allgather";
    r.theta = group.theta;
    if (!errors[m].empty()) {
      r.status = absl::InvalidArgumentError(errors[m]);
      continue;
    }
    const int64_t n_elements = Elements(items[i].ready.spec.shape);
    const size_t bytes = static_cast<size_t>(n_elements) * sizeof(float);
    auto build = [&](void* out) {
      auto* sum = static_cast<float*>(out);
      absl::Status s = dev->Zero(sum, bytes);
      for (int n = 0; n < p && s.ok(); ++n) {
        const Part& part = parts[n][m];
        const auto* idx = reinterpret_cast<const int32_t*>(recv + part.offset);
        const auto* val = reinterpret_cast<const float*>(recv + part.offset +
                                                         static_cast<size_t>(part.header) * 4);
        s = dev->ScatterAdd(idx, val, part.header, 1.0f, sum, n_elements);
      }
      if (s.ok() && items[i].ready.spec.reduce_op == collectives::ReduceOp::kAverage) {
        s = dev->DivideAll(sum, n_elements, static_cast<float>(world));
      }
      return s;
    };
    const absl::Status s = TakeResult(
        items[i], dev, bytes, [&] { return DeviceScratch(dev, &device_buffer_, bytes); }, build,
        &items[i].tensor->data, &r, &queued);
    if (!s.ok()) FailSum(items[i], *dev, s, &r);
  }
  FinishResults(group, items, dev, queued, results);
  return absl::OkStatus();
}

}  // namespace gravac::daemon::internal

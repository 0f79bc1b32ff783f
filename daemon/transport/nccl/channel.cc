#include "daemon/transport/nccl/channel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "daemon/transport/nccl/address.h"
#include "daemon/transport/nccl/nccl_status.h"
#include "core/cuda/cuda_status.h"

namespace gravac::transport::nccl::internal {
namespace {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes);
static_assert(sizeof(WireHeader) == 32);

constexpr int kHeaderSlots = 256;  // messages in flight per channel
constexpr absl::Duration kDrainBound = absl::Seconds(10);

}  // namespace

Channel::Channel(int self_rank, int peer_rank, bool sender, int device)
    : self_rank_(self_rank), peer_rank_(peer_rank), sender_(sender), device_(device) {}

Channel::~Channel() {
  Fail(absl::UnavailableError(absl::StrCat(Describe(), " was closed")));
  (void)cudaSetDevice(device_);
  for (cudaEvent_t event : free_events_) (void)cudaEventDestroy(event);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  if (device_slots_ != nullptr) (void)cudaFree(device_slots_);
  if (host_slots_ != nullptr) (void)cudaFreeHost(host_slots_);
}

std::string Channel::Describe() const {
  return absl::StrFormat("nccl: rank %d: channel %s peer rank %d", self_rank_,
                         sender_ ? "to" : "from", peer_rank_);
}

absl::Status Channel::Init(const std::string& id) {
  const auto init = [&]() -> absl::Status {
    if (id.size() != kUniqueIdBytes) {
      return absl::InvalidArgumentError(absl::StrFormat("unique id of %d bytes", id.size()));
    }
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    GRAVAC_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&device_slots_), kHeaderSlots * sizeof(WireHeader)));
    GRAVAC_CUDA_RETURN_IF_ERROR(
        cudaMallocHost(reinterpret_cast<void**>(&host_slots_), kHeaderSlots * sizeof(WireHeader)));
    for (int slot = kHeaderSlots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
    ncclUniqueId unique_id;
    std::memcpy(unique_id.internal, id.data(), kUniqueIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and launches return ncclInProgress; Progress polls
    const ncclResult_t result =
        ncclCommInitRankConfig(&comm_, 2, unique_id, sender_ ? 0 : 1, &config);
    if (result != ncclInProgress) {
      GRAVAC_NCCL_RETURN_IF_ERROR(result, comm_);
    }
    state_ = State::kInitializing;
    return absl::OkStatus();
  };
  absl::Status status = init();
  if (!status.ok()) {
    Fail(absl::Status(status.code(), absl::StrCat(Describe(), ": init: ", status.message())));
  }
  return error_;
}

void Channel::Post(Message* message) {
  message->stage = Message::Stage::kQueued;
  if (failed()) {
    Complete(message, error_);
    return;
  }
  messages_.push_back(message);
}

void Channel::Cancel(Message* message) {
  if (message->stage == Message::Stage::kDone) return;
  if (message->stage == Message::Stage::kQueued) {
    Complete(message, absl::CancelledError(absl::StrCat(Describe(), ": cancelled")));
    return;
  }
  Fail(absl::UnavailableError(absl::StrCat(Describe(), " was closed to cancel a ",
                                           message->is_send ? "send" : "receive", " in flight")));
}

void Channel::Progress() {
  if (state_ != State::kInitializing && state_ != State::kReady) return;
  const auto step = [&]() -> absl::Status {
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ncclResult_t async = ncclSuccess;
    GRAVAC_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async), comm_);
    if (async != ncclSuccess && async != ncclInProgress) {
      absl::Status s =
          NcclResultToStatus(async, "ncclCommGetAsyncError", comm_, __FILE__, __LINE__);
      if (absl::IsUnavailable(s)) {
        return absl::UnavailableError(
            absl::StrFormat("peer rank %d failed or closed: %s", peer_rank_, s.message()));
      }
      return s;
    }
    const bool busy = async == ncclInProgress;
    if (state_ == State::kInitializing) {
      if (busy) return absl::OkStatus();
      state_ = State::kReady;
    }
    RETURN_IF_ERROR(CompleteBatches());
    if (launching_.has_value()) {
      if (busy) return absl::OkStatus();
      RETURN_IF_ERROR(FinishLaunch());
    } else if (busy) {
      return absl::OkStatus();
    }
    return Launch();
  };
  absl::Status status = step();
  if (!status.ok()) {
    Fail(absl::Status(status.code(), absl::StrCat(Describe(), ": ", status.message())));
  }
}

absl::Status Channel::CompleteBatches() {
  while (!batches_.empty()) {
    const cudaError_t query = cudaEventQuery(batches_.front().event);
    if (query == cudaErrorNotReady) return absl::OkStatus();
    GRAVAC_CUDA_RETURN_IF_ERROR(query);
    Batch batch = std::move(batches_.front());
    batches_.pop_front();
    free_events_.push_back(batch.event);
    for (const Item& item : batch.items) {
      switch (item.phase) {
        case Phase::kSend:
          ReleaseSlot(item.message);
          Complete(item.message, absl::OkStatus());
          break;
        case Phase::kHeader:
          RETURN_IF_ERROR(ApplyHeader(item.message));
          break;
        case Phase::kPayload:
          Complete(item.message, item.message->mismatch);
          break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Channel::ApplyHeader(Message* message) {
  const WireHeader header = *HostSlot(message->slot);
  ReleaseSlot(message);
  if (header.magic != kHeaderMagic || header.seq != next_seq_) {
    return absl::DataLossError(
        absl::StrFormat("out of step: header magic %#x sequence %d, expected %#x sequence %d",
                        header.magic, header.seq, kHeaderMagic, next_seq_));
  }
  ++next_seq_;
  message->bytes = header.size;
  if (header.tag != message->tag) {
    message->mismatch = absl::InvalidArgumentError(absl::StrFormat(
        "%s: a receive posted with tag %d met a message with tag %d (NCCL matches the messages "
        "between two ranks in posting order; post receives in the order of the sends). The %d-byte "
        "message was discarded",
        Describe(), message->tag, header.tag, header.size));
  } else if (header.size > message->size) {
    message->mismatch = absl::InvalidArgumentError(absl::StrFormat(
        "%s: message with tag %d is %d bytes, larger than the %d-byte receive buffer; it was "
        "discarded",
        Describe(), header.tag, header.size, message->size));
  }
  if (header.size == 0) {
    Complete(message, message->mismatch);
  } else {
    message->stage = Message::Stage::kHeaderDone;
  }
  return absl::OkStatus();
}

absl::Status Channel::Launch() {
  Batch batch;
  for (Message* m : messages_) {
    if (sender_) {
      if (m->stage != Message::Stage::kQueued) continue;
      const int slot = AcquireSlot();
      if (slot < 0) break;
      m->slot = slot;
      *HostSlot(slot) = WireHeader{kHeaderMagic, m->tag, m->size, next_seq_++};
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          DeviceSlot(slot), HostSlot(slot), sizeof(WireHeader), cudaMemcpyHostToDevice, stream_));
      m->stage = Message::Stage::kLaunched;
      batch.items.push_back({m, Phase::kSend});
      continue;
    }
    // Receiver: payloads whose header is known, then at most one header (the next message's
    // payload size is unknown until it arrives).
    if (m->stage == Message::Stage::kHeaderDone) {
      if (!m->mismatch.ok()) {
        GRAVAC_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&m->scratch, m->bytes, stream_));
        batch.scratch_to_free.push_back(m->scratch);
      }
      m->stage = Message::Stage::kLaunched;
      batch.items.push_back({m, Phase::kPayload});
    } else if (m->stage == Message::Stage::kQueued) {
      const int slot = AcquireSlot();
      if (slot < 0) break;
      m->slot = slot;
      m->stage = Message::Stage::kHeaderLaunched;
      batch.items.push_back({m, Phase::kHeader});
      break;
    } else if (m->stage == Message::Stage::kHeaderLaunched) {
      break;
    }
  }
  if (batch.items.empty()) return absl::OkStatus();

  GRAVAC_NCCL_RETURN_IF_ERROR(ncclGroupStart(), comm_);
  ncclResult_t posted = ncclSuccess;
  for (const Item& item : batch.items) {
    Message* m = item.message;
    const auto ok = [](ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; };
    switch (item.phase) {
      case Phase::kSend:
        posted = ncclSend(DeviceSlot(m->slot), sizeof(WireHeader), ncclUint8, 1, comm_, stream_);
        if (ok(posted) && m->size > 0) {
          posted = ncclSend(m->data, m->size, ncclUint8, 1, comm_, stream_);
        }
        break;
      case Phase::kHeader:
        posted = ncclRecv(DeviceSlot(m->slot), sizeof(WireHeader), ncclUint8, 0, comm_, stream_);
        break;
      case Phase::kPayload:
        posted = ncclRecv(m->scratch != nullptr ? m->scratch : m->data, m->bytes, ncclUint8, 0,
                          comm_, stream_);
        break;
    }
    if (!ok(posted)) break;
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (posted != ncclInProgress) GRAVAC_NCCL_RETURN_IF_ERROR(posted, comm_);
  launching_ = std::move(batch);
  if (ended == ncclInProgress) return absl::OkStatus();  // enqueued in the background
  GRAVAC_NCCL_RETURN_IF_ERROR(ended, comm_);
  return FinishLaunch();
}

absl::Status Channel::FinishLaunch() {
  Batch& batch = *launching_;
  for (const Item& item : batch.items) {
    if (item.phase == Phase::kHeader) {
      GRAVAC_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(HostSlot(item.message->slot), DeviceSlot(item.message->slot),
                          sizeof(WireHeader), cudaMemcpyDeviceToHost, stream_));
    } else if (item.phase == Phase::kPayload && item.message->scratch != nullptr) {
      GRAVAC_CUDA_RETURN_IF_ERROR(cudaFreeAsync(item.message->scratch, stream_));
      item.message->scratch = nullptr;
    }
  }
  if (free_events_.empty()) {
    cudaEvent_t event;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    free_events_.push_back(event);
  }
  batch.event = free_events_.back();
  free_events_.pop_back();
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventRecord(batch.event, stream_));
  batches_.push_back(std::move(batch));
  launching_.reset();
  return absl::OkStatus();
}

void Channel::Fail(absl::Status error) {
  if (failed()) return;
  error_ = std::move(error);
  state_ = State::kFailed;
  (void)cudaSetDevice(device_);
  if (comm_ != nullptr) {
    (void)ncclCommAbort(comm_);  // kernels of this communicator still running stop
    comm_ = nullptr;
  }
  if (stream_ != nullptr) {
    // Once the stream is idle the device no longer touches any message's buffer.
    const absl::Time give_up = absl::Now() + kDrainBound;
    while (cudaStreamQuery(stream_) == cudaErrorNotReady && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  for (Batch& batch : batches_) free_events_.push_back(batch.event);
  batches_.clear();
  launching_.reset();
  for (Message* m : std::vector<Message*>(messages_.begin(), messages_.end())) {
    if (m->scratch != nullptr) {
      (void)cudaFree(m->scratch);
      m->scratch = nullptr;
    }
    ReleaseSlot(m);
    Complete(m, error_);
  }
  messages_.clear();
}

void Channel::Complete(Message* message, absl::Status status) {
  message->stage = Message::Stage::kDone;
  message->status = std::move(status);
  auto it = std::find(messages_.begin(), messages_.end(), message);
  if (it != messages_.end()) messages_.erase(it);
}

int Channel::AcquireSlot() {
  if (free_slots_.empty()) return -1;
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void Channel::ReleaseSlot(Message* message) {
  if (message->slot < 0) return;
  free_slots_.push_back(message->slot);
  message->slot = -1;
}

}  // namespace gravac::transport::nccl::internal

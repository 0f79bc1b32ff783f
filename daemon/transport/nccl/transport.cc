#include "daemon/transport/nccl/transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "daemon/transport/nccl/address.h"
#include "daemon/transport/nccl/channel.h"
#include "daemon/transport/nccl/nccl_status.h"
#include "core/cuda/cuda_status.h"

namespace gravac::transport::nccl {
namespace internal {

constexpr int kMaxWorldSize = 1 << 16;

// Both directions with one peer rank. Owned by the transport, so requests that outlive nothing
// but their endpoint's Close still find their channel.
struct Peer {
  Peer(int self_rank, int peer_rank, int device)
      : rank(peer_rank),
        send(self_rank, peer_rank, /*sender=*/true, device),
        recv(self_rank, peer_rank, /*sender=*/false, device) {}
  int rank;
  Channel send;
  Channel recv;
};

class NcclTransport : public Transport {
 public:
  NcclTransport(int rank, int world_size, int device, std::vector<std::string> ids)
      : rank_(rank),
        world_size_(world_size),
        device_(device),
        ids_(std::move(ids)),
        peers_(world_size) {}

  std::string_view name() const override { return "nccl"; }
  MemoryTypes memory_types() const override { return kMemoryTypes; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string LocalAddress() const override {
    return EncodeAddress({.rank = rank_, .world_size = world_size_, .ids = ids_});
  }
  absl::StatusOr<std::unique_ptr<Endpoint>> Connect(int peer_rank,
                                                    std::string_view peer_address) override;
  absl::Status Progress() override {
    ProgressAll();
    return absl::OkStatus();
  }

  // Advances every channel; a channel that failed with kUnavailable (peer failure) fails its
  // sibling too, since the peer is gone in both directions.
  void ProgressAll() {
    for (auto& peer : peers_) {
      if (peer == nullptr) continue;
      peer->send.Progress();
      peer->recv.Progress();
      if (absl::IsUnavailable(peer->send.error())) peer->recv.Fail(peer->send.error());
      if (absl::IsUnavailable(peer->recv.error())) peer->send.Fail(peer->recv.error());
    }
  }

 private:
  const int rank_;
  const int world_size_;
  const int device_;
  const std::vector<std::string> ids_;        // of the channels rank -> q
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; set by Connect
};

class NcclRequest : public Request {
 public:
  NcclRequest(NcclTransport* transport, Peer* peer, std::unique_ptr<Message> message)
      : transport_(transport), peer_(peer), message_(std::move(message)) {}
  ~NcclRequest() override { channel().Cancel(message_.get()); }

  absl::StatusOr<bool> Test() override {
    if (!done()) transport_->ProgressAll();
    if (!done()) return false;
    if (!message_->status.ok()) return message_->status;
    return true;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (int idle = 0;; ++idle) {
      absl::StatusOr<bool> finished = Test();
      if (!finished.ok() || *finished) return finished.status();
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrFormat("nccl: rank %d: %s of tag %d with peer rank %d still pending after %s",
                            transport_->rank(), message_->is_send ? "send" : "receive",
                            message_->tag, peer_->rank, absl::FormatDuration(timeout)));
      }
      if (idle % 1024 == 1023) {
        absl::SleepFor(absl::Microseconds(50));
      } else {
        std::this_thread::yield();
      }
    }
  }

  size_t bytes() const override { return message_->bytes; }

 private:
  bool done() const { return message_->stage == Message::Stage::kDone; }
  Channel& channel() { return message_->is_send ? peer_->send : peer_->recv; }

  NcclTransport* transport_;
  Peer* peer_;
  std::unique_ptr<Message> message_;
};

class NcclEndpoint : public Endpoint {
 public:
  NcclEndpoint(NcclTransport* transport, Peer* peer) : transport_(transport), peer_(peer) {}
  ~NcclEndpoint() override { Close(); }

  int peer_rank() const override { return peer_->rank; }

  absl::StatusOr<std::unique_ptr<Request>> Isend(const void* data, size_t size,
                                                 uint64_t tag) override {
    return Post(/*is_send=*/true, const_cast<void*>(data), size, tag);
  }
  absl::StatusOr<std::unique_ptr<Request>> Irecv(void* data, size_t capacity,
                                                 uint64_t tag) override {
    return Post(/*is_send=*/false, data, capacity, tag);
  }

  void Close() override {
    const absl::Status closed = absl::UnavailableError(absl::StrFormat(
        "nccl: rank %d: endpoint to peer rank %d was closed", transport_->rank(), peer_->rank));
    peer_->send.Fail(closed);
    peer_->recv.Fail(closed);
  }

 private:
  absl::StatusOr<std::unique_ptr<Request>> Post(bool is_send, void* data, size_t size,
                                                uint64_t tag) {
    const int rank = transport_->rank();
    if (tag > kMaxUserTag) {
      return absl::InvalidArgumentError(
          absl::StrFormat("nccl: rank %d: tag %d above kMaxUserTag", rank, tag));
    }
    if (data == nullptr && size > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "nccl: rank %d: null buffer of %d bytes for peer rank %d", rank, size, peer_->rank));
    }
    Channel& channel = is_send ? peer_->send : peer_->recv;
    if (channel.failed()) return channel.error();
    auto message = std::make_unique<Message>();
    message->is_send = is_send;
    message->tag = tag;
    message->data = data;
    message->size = size;
    if (is_send) message->bytes = size;
    channel.Post(message.get());
    return std::unique_ptr<Request>(new NcclRequest(transport_, peer_, std::move(message)));
  }

  NcclTransport* transport_;
  Peer* peer_;
};

absl::StatusOr<std::unique_ptr<Endpoint>> NcclTransport::Connect(int peer_rank,
                                                                 std::string_view peer_address) {
  if (peer_rank < 0 || peer_rank >= world_size_ || peer_rank == rank_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nccl: rank %d: cannot connect to rank %d in a world of %d", rank_,
                        peer_rank, world_size_));
  }
  ASSIGN_OR_RETURN(const std::string peer_id,
                   ParsePeerAddress(peer_address, rank_, peer_rank, world_size_));
  if (peers_[peer_rank] != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nccl: rank %d: already connected to peer rank %d", rank_, peer_rank));
  }
  auto peer = std::make_unique<Peer>(rank_, peer_rank, device_);
  RETURN_IF_ERROR(peer->send.Init(ids_[peer_rank]));
  RETURN_IF_ERROR(peer->recv.Init(peer_id));
  Peer* raw = peer.get();
  peers_[peer_rank] = std::move(peer);
  return std::unique_ptr<Endpoint>(new NcclEndpoint(this, raw));
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options) {
  const int rank = options.rank;
  if (options.world_size < 1 || options.world_size > internal::kMaxWorldSize || rank < 0 ||
      rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nccl transport: rank %d / world size %d (at most %d ranks)", rank,
                        options.world_size, internal::kMaxWorldSize));
  }
  int device = -1;
  for (const auto& [key, value] : options.params) {
    if (key != "device") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "nccl transport: rank %d: unknown parameter '%s' (known: device)", rank, key));
    }
    if (!absl::SimpleAtoi(value, &device) || device < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "nccl transport: rank %d: parameter device=%s is not a CUDA device ordinal", rank,
          value));
    }
  }
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "nccl transport: rank %d: no CUDA device (cudaGetDeviceCount: %s, %d devices)", rank,
        cudaGetErrorString(counted), devices));
  }
  if (device < 0) device = rank % devices;
  if (device >= devices) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "nccl transport: rank %d: device %d requested, %d present", rank, device, devices));
  }
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  std::vector<std::string> ids(options.world_size);
  for (int q = 0; q < options.world_size; ++q) {
    if (q == rank) continue;
    ncclUniqueId id;
    GRAVAC_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id), nullptr);
    ids[q].assign(id.internal, kUniqueIdBytes);
  }
  return std::unique_ptr<Transport>(
      new internal::NcclTransport(rank, options.world_size, device, std::move(ids)));
}

}  // namespace gravac::transport::nccl

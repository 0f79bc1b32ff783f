#include "daemon/transport/loopback/transport.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::transport::loopback {
namespace internal {

class LoopbackRequest : public Request {
 public:
  LoopbackRequest(Fabric* fabric, std::shared_ptr<Op> op) : fabric_(fabric), op_(std::move(op)) {}
  ~LoopbackRequest() override { fabric_->Cancel(op_); }

  absl::StatusOr<bool> Test() override { return fabric_->Test(op_); }
  absl::Status Wait(absl::Duration timeout) override { return fabric_->Wait(op_, timeout); }
  size_t bytes() const override { return op_->bytes; }

 private:
  Fabric* fabric_;
  std::shared_ptr<Op> op_;
};

class LoopbackEndpoint : public Endpoint {
 public:
  LoopbackEndpoint(Fabric* fabric, int rank, int peer)
      : fabric_(fabric), rank_(rank), peer_(peer) {}
  ~LoopbackEndpoint() override { Close(); }

  int peer_rank() const override { return peer_; }

  absl::StatusOr<std::unique_ptr<Request>> Isend(const void* data, size_t size,
                                                 uint64_t tag) override {
    auto op = std::make_shared<Op>();
    op->is_send = true;
    op->send_data = data;
    op->src = rank_;
    op->dst = peer_;
    return Post(std::move(op), data, size, tag);
  }

  absl::StatusOr<std::unique_ptr<Request>> Irecv(void* data, size_t capacity,
                                                 uint64_t tag) override {
    auto op = std::make_shared<Op>();
    op->recv_data = data;
    op->src = peer_;
    op->dst = rank_;
    return Post(std::move(op), data, capacity, tag);
  }

  void Close() override { fabric_->CloseEndpoint(rank_, peer_); }

 private:
  absl::StatusOr<std::unique_ptr<Request>> Post(std::shared_ptr<Op> op, const void* data,
                                                size_t size, uint64_t tag) {
    if (tag > kMaxUserTag) {
      return absl::InvalidArgumentError(
          absl::StrFormat("loopback: rank %d: tag %d above kMaxUserTag", rank_, tag));
    }
    if (data == nullptr && size > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loopback: rank %d: null buffer of %d bytes for peer rank %d", rank_, size, peer_));
    }
    op->owner = rank_;
    op->tag = tag;
    op->size = size;
    RETURN_IF_ERROR(fabric_->Post(op));
    return std::unique_ptr<Request>(new LoopbackRequest(fabric_, std::move(op)));
  }

  Fabric* fabric_;
  int rank_;
  int peer_;
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(Fabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}

  std::string_view name() const override { return "loopback"; }
  MemoryTypes memory_types() const override { return kMemoryTypes; }
  int rank() const override { return rank_; }
  int world_size() const override { return fabric_->world_size(); }

  std::string LocalAddress() const override {
    return absl::StrFormat("loopback:%x:%d", fabric_->id(), rank_);
  }

  absl::StatusOr<std::unique_ptr<Endpoint>> Connect(int peer_rank,
                                                    std::string_view peer_address) override {
    if (peer_rank < 0 || peer_rank >= world_size() || peer_rank == rank_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("loopback: rank %d: cannot connect to rank %d in a world of %d", rank_,
                          peer_rank, world_size()));
    }
    const std::string expected = absl::StrFormat("loopback:%x:%d", fabric_->id(), peer_rank);
    if (peer_address != expected) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loopback: rank %d: address '%s' is not peer rank %d of this fabric (want '%s')", rank_,
          peer_address, peer_rank, expected));
    }
    RETURN_IF_ERROR(fabric_->MarkConnected(rank_, peer_rank));
    return std::unique_ptr<Endpoint>(new LoopbackEndpoint(fabric_, rank_, peer_rank));
  }

  absl::Status Progress() override { return absl::OkStatus(); }

 private:
  Fabric* fabric_;
  int rank_;
};

}  // namespace internal

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options) {
  auto* fabric = dynamic_cast<Fabric*>(options.context);
  if (fabric == nullptr) {
    return absl::InvalidArgumentError(
        "loopback transport needs a loopback::Fabric as TransportOptions::context");
  }
  if (options.world_size != fabric->world_size() || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "loopback transport: rank %d / world size %d does not fit a fabric of %d ranks",
        options.rank, options.world_size, fabric->world_size()));
  }
  if (!options.params.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("loopback transport: unknown parameter '%s'",
                                                      options.params.front().first));
  }
  return std::unique_ptr<Transport>(new internal::LoopbackTransport(fabric, options.rank));
}

}  // namespace gravac::transport::loopback

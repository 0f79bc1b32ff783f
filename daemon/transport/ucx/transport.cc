#include "daemon/transport/ucx/transport.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "daemon/transport/ucx/worker.h"

namespace gravac::transport::ucx {
namespace internal {

constexpr int kRankShift = 48;
constexpr int kMaxWorldSize = 1 << 16;
constexpr char kAddressPrefix[] = "ucx:";
// Longest single block in the kernel: UCX keeps timers (keepalive) that only run when the worker
// is progressed, so long waits are cut into slices.
constexpr absl::Duration kMaxEventWait = absl::Milliseconds(10);

struct Peer;

// The state of one send or receive; owned by its UcxRequest.
struct Op {
  Peer* peer = nullptr;
  bool is_send = false;
  uint64_t tag = 0;
  size_t size = 0;
  void* ucx = nullptr;  // UCX request handle while pending
  bool done = false;
  ucs_status_t status = UCS_OK;
  ucp_tag_recv_info_t info = {};
};

// Everything the transport knows about one peer rank. Owned by the transport, so UCX callbacks
// that carry a Peer* stay valid after the Endpoint is gone.
struct Peer {
  int rank = -1;
  ucp_ep_h ep = nullptr;
  bool detects_failure = true;  // UCP_ERR_HANDLING_MODE_PEER (see Connect)
  bool failed = false;          // the peer failed or the endpoint was closed: `error` says which
  absl::Status error;
  std::set<Op*> pending;
};

class UcxTransport;

void OpDone(Op* op, void* request, ucs_status_t status) {
  op->done = true;
  op->status = status;
  op->ucx = nullptr;
  op->peer->pending.erase(op);
  ucp_request_free(request);
}

void SendDone(void* request, ucs_status_t status, void* user_data) {
  OpDone(static_cast<Op*>(user_data), request, status);
}

void RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
              void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  if (info != nullptr) op->info = *info;
  OpDone(op, request, status);
}

class UcxTransport : public Transport {
 public:
  UcxTransport(std::unique_ptr<Worker> worker, int rank, int world_size)
      : worker_(std::move(worker)), rank_(rank), world_size_(world_size), peers_(world_size) {}
  ~UcxTransport() override;

  std::string_view name() const override { return "ucx"; }
  MemoryTypes memory_types() const override { return kMemoryTypes; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string LocalAddress() const override {
    return absl::StrCat(kAddressPrefix, rank_, ":", worker_->address());
  }
  absl::StatusOr<std::unique_ptr<Endpoint>> Connect(int peer_rank,
                                                    std::string_view peer_address) override;
  absl::Status Progress() override {
    ProgressAll();
    return absl::OkStatus();
  }
  absl::Status WaitForActivity(absl::Duration timeout) override {
    ProgressAll();
    return WaitForEvent(timeout);
  }

  // Blocks in the kernel until the worker has an event or `timeout` (at most kMaxEventWait)
  // passes; call right after ProgressAll (see Worker::WaitForEvent).
  absl::Status WaitForEvent(absl::Duration timeout) {
    absl::Status s = worker_->WaitForEvent(std::min(timeout, kMaxEventWait));
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrFormat("ucx: rank %d: %s", rank_, s.message()));
  }

  // Runs the worker until idle, then acts on peer failures and finished closes.
  void ProgressAll();
  // Fails `peer` with `error`: cancels its pending receives and closes its endpoint (`force`:
  // pending sends fail at once; otherwise they are flushed first).
  void FailPeer(Peer* peer, absl::Status error, bool force);
  // Takes a receive that its peer's close could not complete (a receive matched to the first
  // fragments of an eager message whose sender is gone): waits, within a bound, for the peer's
  // close to finish (no more data can then arrive for it), removes it from the peer and keeps the
  // Op alive until the transport is destroyed, in case UCX ever completes the request.
  void AbandonReceive(std::unique_ptr<Op> op);
  // Closes still flushing (ucp_ep_close_nbx requests).
  bool closing() const { return !closing_.empty(); }
  absl::Status Finish(const Op& op) const;
  ucp_worker_h worker() const { return worker_->worker(); }

  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

 private:
  std::unique_ptr<Worker> worker_;
  int rank_;
  int world_size_;
  std::vector<std::unique_ptr<Peer>> peers_;    // by rank; set by Connect
  std::vector<Peer*> errored_;                  // failed inside a UCX callback; handled after it
  std::vector<void*> closing_;                  // ucp_ep_close_nbx requests in flight
  std::vector<std::unique_ptr<Op>> abandoned_;  // AbandonReceive
};

class UcxRequest : public Request {
 public:
  UcxRequest(UcxTransport* transport, std::unique_ptr<Op> op)
      : transport_(transport), op_(std::move(op)) {}
  ~UcxRequest() override;

  absl::StatusOr<bool> Test() override {
    if (!op_->done) transport_->ProgressAll();
    if (!op_->done) {
      // A receive its peer's failure or close could not cancel (matched to the first fragments of
      // an eager message whose rest will not come): it fails like the others (the destructor
      // abandons it).
      if (!op_->is_send && op_->peer->failed && op_->peer->ep == nullptr) return op_->peer->error;
      return false;
    }
    if (!final_.has_value()) final_ = transport_->Finish(*op_);  // fixed once known
    if (!final_->ok()) return *final_;
    return true;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      absl::StatusOr<bool> done = Test();  // progresses the worker until idle
      if (!done.ok() || *done) return done.status();
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrFormat("ucx: rank %d: %s of tag %d with peer rank %d still pending after %s",
                            transport_->rank(), op_->is_send ? "send" : "receive", op_->tag,
                            op_->peer->rank, absl::FormatDuration(timeout)));
      }
      // Sleep in the kernel until the network has something for the worker, leaving the cores to
      // peers sharing them and to the kernel's network processing.
      RETURN_IF_ERROR(transport_->WaitForEvent(deadline - now));
    }
  }

  size_t bytes() const override { return op_->is_send ? op_->size : op_->info.length; }

 private:
  UcxTransport* transport_;
  std::unique_ptr<Op> op_;
  std::optional<absl::Status> final_;
};

class UcxEndpoint : public Endpoint {
 public:
  UcxEndpoint(UcxTransport* transport, Peer* peer) : transport_(transport), peer_(peer) {}
  ~UcxEndpoint() override { Close(); }

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
    if (peer_->failed) return;
    transport_->FailPeer(
        peer_,
        absl::UnavailableError(absl::StrFormat("ucx: rank %d: endpoint to peer rank %d was closed",
                                               transport_->rank(), peer_->rank)),
        /*force=*/false);
  }

  ucp_ep_h ep() const { return peer_->ep; }

 private:
  absl::StatusOr<std::unique_ptr<Request>> Post(bool is_send, void* data, size_t size,
                                                uint64_t tag);

  UcxTransport* transport_;
  Peer* peer_;
};

absl::StatusOr<std::unique_ptr<Request>> UcxEndpoint::Post(bool is_send, void* data, size_t size,
                                                           uint64_t tag) {
  const int rank = transport_->rank();
  if (tag > kMaxUserTag) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ucx: rank %d: tag %d above kMaxUserTag", rank, tag));
  }
  if (data == nullptr && size > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ucx: rank %d: null buffer of %d bytes for peer rank %d", rank, size, peer_->rank));
  }
  if (peer_->failed) return peer_->error;
  auto op = std::make_unique<Op>();
  op->peer = peer_;
  op->is_send = is_send;
  op->tag = tag;
  op->size = size;
  ucp_request_param_t param = {};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.user_data = op.get();
  ucs_status_ptr_t request;
  if (is_send) {
    param.cb.send = &SendDone;
    request = ucp_tag_send_nbx(peer_->ep, data, size,
                               (uint64_t{static_cast<uint32_t>(rank)} << kRankShift) | tag, &param);
  } else {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
    param.cb.recv = &RecvDone;
    param.recv_info.tag_info = &op->info;
    request = ucp_tag_recv_nbx(transport_->worker(), data, size,
                               (uint64_t{static_cast<uint32_t>(peer_->rank)} << kRankShift) | tag,
                               ~uint64_t{0}, &param);
  }
  if (UCS_PTR_IS_ERR(request)) {
    op->done = true;
    op->status = UCS_PTR_STATUS(request);
  } else if (request == nullptr) {
    op->done = true;  // completed at once
  } else if (!op->done) {
    op->ucx = request;
    peer_->pending.insert(op.get());
  }
  return std::unique_ptr<Request>(new UcxRequest(transport_, std::move(op)));
}

UcxRequest::~UcxRequest() {
  if (op_->done) return;
  ucp_request_cancel(transport_->worker(), op_->ucx);
  const absl::Time give_up = absl::Now() + absl::Milliseconds(200);
  while (!op_->done && absl::Now() < give_up) transport_->ProgressAll();
  if (!op_->done) {
    // UCX could not cancel (a send waiting for its receive): closing the endpoint completes it.
    transport_->FailPeer(
        op_->peer,
        absl::UnavailableError(absl::StrFormat(
            "ucx: rank %d: endpoint to peer rank %d was closed to cancel a %s", transport_->rank(),
            op_->peer->rank, op_->is_send ? "send" : "receive")),
        /*force=*/true);
    if (!op_->is_send) {
      transport_->AbandonReceive(std::move(op_));
      return;
    }
    while (!op_->done) transport_->ProgressAll();
  }
}

void UcxTransport::AbandonReceive(std::unique_ptr<Op> op) {
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (!op->done && closing() && absl::Now() < give_up) ProgressAll();
  if (op->done) return;
  op->peer->pending.erase(op.get());
  abandoned_.push_back(std::move(op));
}

void UcxTransport::OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->failed) return;
  peer->failed = true;
  peer->error = absl::UnavailableError(
      absl::StrFormat("peer rank %d failed: %s", peer->rank, ucs_status_string(status)));
}

void UcxTransport::ProgressAll() {
  while (worker_->Progress()) {
  }
  for (auto& peer : peers_) {
    // The error callback only marks the peer; the endpoint is closed here, outside UCX.
    if (peer != nullptr && peer->failed && peer->ep != nullptr) {
      FailPeer(
          peer.get(),
          absl::UnavailableError(absl::StrFormat("ucx: rank %d: %s", rank_, peer->error.message())),
          /*force=*/true);
    }
  }
  std::erase_if(closing_, [](void* request) {
    if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
    ucp_request_free(request);
    return true;
  });
}

void UcxTransport::FailPeer(Peer* peer, absl::Status error, bool force) {
  peer->failed = true;
  peer->error = std::move(error);
  bool sends_pending = false;
  for (Op* op : std::vector<Op*>(peer->pending.begin(), peer->pending.end())) {
    if (!op->is_send) {
      ucp_request_cancel(worker(), op->ucx);
    } else if (!peer->detects_failure) {
      // UCX cannot force-close an endpoint without failure detection (it answers
      // UCS_ERR_INVALID_PARAM and leaves it open), and a flush waits for a peer that may be gone:
      // abandon the send, so it fails now as Close promises. UCX keeps its request (released to it
      // here) and invokes no callback for it.
      ucp_request_free(op->ucx);
      op->ucx = nullptr;
      op->done = true;
      op->status = UCS_ERR_CANCELED;
      peer->pending.erase(op);
    } else {
      sends_pending = true;
    }
  }
  if (peer->ep == nullptr) return;
  ucp_request_param_t param = {};
  if ((force || sends_pending) && peer->detects_failure) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  ucs_status_ptr_t request = ucp_ep_close_nbx(peer->ep, &param);
  peer->ep = nullptr;
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing_.push_back(request);
}

absl::Status UcxTransport::Finish(const Op& op) const {
  if (op.status == UCS_OK) return absl::OkStatus();
  if (op.status == UCS_ERR_MESSAGE_TRUNCATED) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ucx: rank %d: message with tag %d from peer rank %d is larger than the %d-byte receive "
        "buffer",
        rank_, op.tag, op.peer->rank, op.size));
  }
  if (op.peer->failed) return op.peer->error;
  return absl::Status(UcsCode(op.status),
                      absl::StrFormat("ucx: rank %d: %s of tag %d with peer rank %d failed: %s",
                                      rank_, op.is_send ? "send" : "receive", op.tag, op.peer->rank,
                                      ucs_status_string(op.status)));
}

absl::StatusOr<std::unique_ptr<Endpoint>> UcxTransport::Connect(int peer_rank,
                                                                std::string_view peer_address) {
  if (peer_rank < 0 || peer_rank >= world_size_ || peer_rank == rank_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ucx: rank %d: cannot connect to rank %d in a world of %d", rank_, peer_rank, world_size_));
  }
  const std::string_view prefix = kAddressPrefix;
  const size_t colon = peer_address.find(':', prefix.size());
  int blob_rank = -1;
  if (!peer_address.starts_with(prefix) || colon == std::string_view::npos ||
      !absl::SimpleAtoi(
          absl::string_view(peer_address.data() + prefix.size(), colon - prefix.size()),
          &blob_rank) ||
      colon + 1 == peer_address.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ucx: rank %d: the address given for peer rank %d is not a ucx address", rank_, peer_rank));
  }
  if (blob_rank != peer_rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ucx: rank %d: the address given for peer rank %d belongs to rank %d",
                        rank_, peer_rank, blob_rank));
  }
  if (peers_[peer_rank] != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ucx: rank %d: already connected to peer rank %d", rank_, peer_rank));
  }
  auto peer = std::make_unique<Peer>();
  peer->rank = peer_rank;
  const std::string worker_address(peer_address.substr(colon + 1));
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(worker_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::OnEndpointError;
  params.err_handler.arg = peer.get();
  ucs_status_t status = ucp_ep_create(worker(), &params, &peer->ep);
  if (status == UCS_ERR_UNREACHABLE) {
    // Shared-memory transports (posix, sysv) cannot detect peer failure; when they are all UCX
    // may use (UCX_TLS=shm), connect without failure detection.
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    peer->detects_failure = false;
    status = ucp_ep_create(worker(), &params, &peer->ep);
  }
  if (status != UCS_OK) {
    return absl::Status(UcsCode(status),
                        absl::StrFormat("ucx: rank %d: ucp_ep_create to peer rank %d failed: %s",
                                        rank_, peer_rank, ucs_status_string(status)));
  }
  Peer* raw = peer.get();
  peers_[peer_rank] = std::move(peer);
  return std::unique_ptr<Endpoint>(new UcxEndpoint(this, raw));
}

UcxTransport::~UcxTransport() {
  for (auto& peer : peers_) {
    if (peer != nullptr && peer->ep != nullptr) {
      FailPeer(peer.get(), absl::UnavailableError("ucx: transport destroyed"), /*force=*/true);
    }
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (!closing_.empty() && absl::Now() < give_up) ProgressAll();
  // A close still flushing (towards a peer that is gone, over shared memory) is handed to UCX:
  // ucp_worker_destroy asserts that every close request left is released.
  for (void* request : closing_) ucp_request_free(request);
  closing_.clear();
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const TransportOptions& options) {
  if (options.world_size < 1 || options.world_size > internal::kMaxWorldSize || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ucx transport: rank %d / world size %d (at most %d ranks)", options.rank,
                        options.world_size, internal::kMaxWorldSize));
  }
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      Worker::Create(options.params, options.op_timeout);
  if (!worker.ok()) {
    return absl::Status(
        worker.status().code(),
        absl::StrFormat("ucx transport: rank %d: %s", options.rank, worker.status().message()));
  }
  return std::unique_ptr<Transport>(
      new internal::UcxTransport(*std::move(worker), options.rank, options.world_size));
}

absl::StatusOr<std::string> DescribeEndpoint(Endpoint& endpoint) {
  auto* ucx_endpoint = dynamic_cast<internal::UcxEndpoint*>(&endpoint);
  if (ucx_endpoint == nullptr) {
    return absl::InvalidArgumentError("DescribeEndpoint: not a ucx endpoint");
  }
  if (ucx_endpoint->ep() == nullptr) {
    return absl::FailedPreconditionError("DescribeEndpoint: the endpoint is closed");
  }
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return absl::ResourceExhaustedError("open_memstream failed");
  ucp_ep_print_info(ucx_endpoint->ep(), stream);
  std::fclose(stream);
  std::string description(text, length);
  std::free(text);
  return description;
}

}  // namespace gravac::transport::ucx

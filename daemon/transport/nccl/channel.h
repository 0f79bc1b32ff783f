// Channel: one direction of one pair of ranks in the NCCL transport: a two-rank NCCL communicator
// (the sender is its rank 0, the receiver its rank 1) with its own CUDA stream, carrying the
// sender's messages to the receiver in posting order.
//
// Why one communicator per direction. NCCL runs the operations of one communicator one after the
// other on the device, whatever stream they are posted to, and a large ncclSend finishes only when
// the matching ncclRecv runs. With one communicator per pair, or one for the world, a send posted
// before a receive that its peer's send depends on would deadlock (two ranks that each post Isend,
// then Irecv, and wait). With one communicator per direction, a channel's queue holds only sends
// (or only receives) to one peer, and they match the other side's queue in order, so any posting
// order that works over UCX works here. The price: 2 (p - 1) communicators per rank (each with
// NCCL's proxy thread and buffers), and progress relies on kernels of different communicators
// running side by side on the device, which NCCL does not promise: CUDA provides it while SMs and
// hardware queues are free, not with CUDA_DEVICE_MAX_CONNECTIONS=1 (one queue for all streams).
//
// Messages. NCCL has no tags and needs the receiver to know a message's exact size, so every
// message is a 32-byte header (magic, tag, size, sequence number) followed by its payload. The
// receiver takes the header first, copies it to pinned host memory, then posts the payload
// receive of the size the header gives, and only then the next header: receives match sends
// strictly in posting order. A receive whose tag differs from the header's, or whose capacity is
// below the message size, still consumes the message (into a stream-ordered scratch buffer) and
// fails with kInvalidArgument naming both tags or sizes; the channel stays usable. A header with a
// wrong magic or sequence number fails the channel (kDataLoss).
//
// Progress. Nothing here blocks: communicator init is non-blocking (ncclConfig_t::blocking = 0)
// and polled with ncclCommGetAsyncError; ready messages are launched as one ncclGroupStart/End
// batch, which is followed by a CUDA event; a batch is complete when cudaEventQuery says so.
// Progress() advances all of that and must be called until the messages are done.
//
// Failure. Fail() records the first error, aborts the communicator (ncclCommAbort: kernels still
// running stop), waits up to a bound for the stream to drain, and fails every message still
// pending. An asynchronous NCCL error (ncclRemoteError, ncclSystemError: the peer died or closed)
// fails the channel with kUnavailable naming the peer rank.
//
// Thread-safety: thread-compatible (the transport's single thread). Messages are owned by their
// requests; a request cancels its message (Cancel) before freeing it.
#ifndef GRAVAC_DAEMON_TRANSPORT_NCCL_CHANNEL_H_
#define GRAVAC_DAEMON_TRANSPORT_NCCL_CHANNEL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gravac::transport::nccl::internal {

// On the wire before every payload.
struct WireHeader {
  uint64_t magic;
  uint64_t tag;
  uint64_t size;
  uint64_t seq;
};
inline constexpr uint64_t kHeaderMagic = 0x6772766e63636c31;  // "grvnccl1"

// One send or receive. Owned by its request.
struct Message {
  enum class Stage {
    kQueued,          // posted, nothing launched
    kHeaderLaunched,  // receive: header receive in flight
    kHeaderDone,      // receive: header known, payload receive not launched yet
    kLaunched,        // send: header and payload in flight; receive: payload in flight
    kDone,            // `status` is final
  };
  bool is_send = false;
  uint64_t tag = 0;
  void* data = nullptr;
  size_t size = 0;   // send: message size; receive: capacity
  size_t bytes = 0;  // message size (receive: from the header)
  Stage stage = Stage::kQueued;
  absl::Status status;      // final once kDone
  absl::Status mismatch;    // receive: why the message is discarded (tag or size), else OK
  void* scratch = nullptr;  // receive: device buffer the discarded payload goes to
  int slot = -1;            // header slot while in flight
};

class Channel {
 public:
  // `sender`: this rank sends on the channel (its communicator rank 0). `device`: CUDA ordinal.
  Channel(int self_rank, int peer_rank, bool sender, int device);
  ~Channel();  // aborts the communicator; pending messages are failed
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Creates the stream and header slots and starts the communicator's non-blocking init with the
  // raw ncclUniqueId `id`. On error the channel is failed and the error returned.
  absl::Status Init(const std::string& id);

  // Appends `message` (stage kQueued); it is launched by Progress in posting order.
  void Post(Message* message);
  // Called by the owner before freeing a message that is not done: drops it when nothing of it was
  // launched, otherwise fails the channel (kUnavailable) so the device no longer touches its
  // buffer. Returns with the message out of every queue.
  void Cancel(Message* message);

  // Advances init, launches and completions; never blocks.
  void Progress();

  // Fails the channel with `error` (see the header comment). Idempotent: the first error stays.
  void Fail(absl::Status error);

  bool failed() const { return !error_.ok(); }
  const absl::Status& error() const { return error_; }
  bool ready() const { return state_ == State::kReady; }

 private:
  enum class State { kNew, kInitializing, kReady, kFailed };
  enum class Phase { kSend, kHeader, kPayload };
  struct Item {
    Message* message;
    Phase phase;
  };
  struct Batch {
    std::vector<Item> items;
    std::vector<void*> scratch_to_free;  // freed on the stream after the group
    cudaEvent_t event = nullptr;
  };

  absl::Status CheckAsync();  // polls ncclCommGetAsyncError; error -> status
  absl::Status CompleteBatches();
  absl::Status Launch();
  absl::Status FinishLaunch();  // after the group is enqueued: header copies, frees, event
  absl::Status ApplyHeader(Message* message);
  void Complete(Message* message, absl::Status status);
  int AcquireSlot();
  void ReleaseSlot(Message* message);
  WireHeader* HostSlot(int slot) { return host_slots_ + slot; }
  WireHeader* DeviceSlot(int slot) { return device_slots_ + slot; }
  std::string Describe() const;

  const int self_rank_;
  const int peer_rank_;
  const bool sender_;
  const int device_;
  State state_ = State::kNew;
  absl::Status error_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  WireHeader* device_slots_ = nullptr;
  WireHeader* host_slots_ = nullptr;  // pinned
  std::vector<int> free_slots_;
  std::vector<cudaEvent_t> free_events_;
  std::deque<Message*> messages_;   // posted and not done, in posting order
  std::optional<Batch> launching_;  // group ended with ncclInProgress
  std::deque<Batch> batches_;       // enqueued, complete in order
  uint64_t next_seq_ = 0;           // of the next message posted (send) / expected (receive)
};

}  // namespace gravac::transport::nccl::internal

#endif  // GRAVAC_DAEMON_TRANSPORT_NCCL_CHANNEL_H_

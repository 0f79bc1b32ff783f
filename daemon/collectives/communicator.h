// Communicator: one rank's view of a group of p ranks connected by transport Endpoints, and the
// collectives over it: ring Allreduce (sum or average of fp32, fp16, bf16), Allgatherv (a
// different byte count per rank, for sparse payloads), Broadcast and Barrier.
//
//   ASSIGN_OR_RETURN(auto comm, Communicator::Connect(*transport, addresses, options));
//   RETURN_IF_ERROR(comm->Allreduce(grad, grad, n, DataType::kFloat32, ReduceOp::kAverage));
//
// Contract.
//  - Every rank calls the same collectives in the same order with matching arguments (count,
//    type, op, root, per-rank sizes); each call gets a sequence number that is part of every
//    message tag, so back-to-back collectives never match each other's messages.
//  - Buffers are the caller's and are only used during the call. Allreduce is in place when
//    in == out; otherwise in is only read. Partially overlapping in/out is not allowed.
//  - Allreduce is a ring reduce-scatter followed by a ring allgather (2(p-1) steps; each rank
//    sends about 2(p-1)/p of the buffer). The steps are one pipeline (the classic pipelined ring,
//    as NCCL's slices): every segment moves in messages of options.chunk_bytes, and chunk c of
//    step g+1 leaves as soon as chunk c of step g has arrived and been reduced, so a step's first
//    messages overlap the previous step's last ones and the link never drains between steps. Up
//    to options.max_inflight_chunks messages are in flight per direction; each received chunk is
//    reduced while the next ones are on the wire. Allgatherv runs its p-1 steps the same way.
//    Rounding of fp16/bf16: see reduce.h. Average divides the reduced sum by p once, in fp32.
//  - Every call blocks until it is done or failed. A peer that reports a failure (closed
//    connection) fails the call with kUnavailable; a peer from which nothing completes for
//    options.op_timeout fails it with kDeadlineExceeded. Messages name this rank, the collective
//    and the peer, e.g. "rank 2: allreduce: no progress from peer rank 3 within 5s".
//  - After any failure the communicator is aborted: it closes all its endpoints (so the other
//    ranks fail fast too instead of waiting for their own timeouts) and every later call returns
//    kFailedPrecondition carrying the first error.
//
// Thread-safety: thread-compatible; one collective at a time per communicator (it owns the
// endpoints and a scratch buffer). The Transport that made the endpoints must outlive it; one given
// the transport (Connect, Create) also uses it directly (WaitForActivity), so no other thread may
// use that transport during a collective.
#ifndef GRAVAC_DAEMON_COLLECTIVES_COMMUNICATOR_H_
#define GRAVAC_DAEMON_COLLECTIVES_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/collectives/reduce.h"
#include "daemon/transport/transport.h"

namespace gravac::collectives {

struct CommunicatorOptions {
  size_t chunk_bytes = size_t{1} << 20;  // rounded down to a multiple of 8, at least 8
  int max_inflight_chunks = 4;           // per direction, at least 1
  absl::Duration op_timeout = absl::Seconds(30);
  // Allreduce and Allgatherv, when idle (nothing completed). A communicator given its transport
  // (Connect, or Create with one) whose backend supports Transport::WaitForActivity (ucx) blocks
  // there, in the kernel, until the network has something for it, and ignores this. Otherwise
  // (no transport given, loopback), once nothing has completed for a short spin (a 50us Wait in
  // the transport), the rank sleeps between tests, from 10us doubling up to this bound, so that
  // ranks sharing cores (p ranks on a 2-core machine, or a loaded one) leave them to their peers
  // and to the kernel's network processing instead of spinning; the sockets' buffers keep the
  // links busy meanwhile. Zero: always wait in the transport (which may spin).
  absl::Duration max_idle_sleep = absl::Microseconds(200);
};

class Communicator {
 public:
  // peers[r] is the endpoint to rank r; peers[rank] must be null. 1 <= world_size <= 16384.
  // `transport`, when given, is the one that made the endpoints (not owned; it must outlive the
  // communicator): idle collectives then block in its WaitForActivity (see max_idle_sleep).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      int rank, std::vector<std::unique_ptr<transport::Endpoint>> peers,
      const CommunicatorOptions& options, transport::Transport* transport = nullptr);

  // Connects `transport` to every peer using addresses[r] (e.g. from FileRendezvous), then
  // Create. Does not wait for the peers: the first collective does.
  static absl::StatusOr<std::unique_ptr<Communicator>> Connect(
      transport::Transport& transport, absl::Span<const std::string> addresses,
      const CommunicatorOptions& options);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  const CommunicatorOptions& options() const { return options_; }

  // out[i] = op over ranks of in[i], for i < count elements of `type`.
  absl::Status Allreduce(const void* in, void* out, size_t count, DataType type, ReduceOp op);

  // Concatenates every rank's block into recv in rank order: rank i contributes
  // bytes_per_rank[i] bytes (its own from `send`) at offset sum(bytes_per_rank[0..i)). In place
  // when `send` points at this rank's block inside recv.
  absl::Status Allgatherv(const void* send, void* recv, absl::Span<const size_t> bytes_per_rank);

  // As Allgatherv, when ranks do not know each other's sizes: exchanges them first (a second
  // collective), fills *bytes_per_rank and resizes *recv to their sum.
  absl::Status AllgathervAnySize(absl::Span<const uint8_t> send, std::vector<uint8_t>* recv,
                                 std::vector<size_t>* bytes_per_rank);

  // A communicator over the ranks `ranks` of this one (sorted, distinct, in range, this rank
  // among them): rank i of the result is ranks[i] here. It borrows this communicator's endpoints
  // and transport, so this one must outlive it, and the two must not run collectives at the
  // same time; its messages carry tags of their own (a tag space derived from `ranks`, the same
  // on every member), so collectives of the two in turn never match each other's messages. Every
  // member must make the same subset. InvalidArgument for a bad list.
  absl::StatusOr<std::unique_ptr<Communicator>> Subset(absl::Span<const int> ranks);

  // Copies root's `bytes` bytes of data to every rank's data.
  absl::Status Broadcast(void* data, size_t bytes, int root);

  // Returns once every rank has entered Barrier (dissemination: ceil(log2 p) rounds).
  absl::Status Barrier();

  // The first error, once aborted; OK before.
  absl::Status abort_status() const { return abort_status_; }

 private:
  struct Transfer;  // one step of a broadcast or barrier, defined in the .cc
  struct RingStep;  // one step of a pipelined ring (allreduce, allgatherv), defined in the .cc

  Communicator(int rank, std::vector<std::unique_ptr<transport::Endpoint>> peers,
               const CommunicatorOptions& options);
  Communicator(int rank, std::vector<transport::Endpoint*> peers, uint8_t tag_space,
               const CommunicatorOptions& options);

  // Checks the abort state and claims the next sequence number.
  absl::Status Begin(const char* collective);
  // Aborts on error; returns `status`.
  absl::Status Finish(absl::Status status);
  // 48 bits: the tag space (8; 0 for a communicator made by Create), the sequence number (24)
  // and the step (16).
  uint64_t Tag(int step) const {
    return (uint64_t{tag_space_} << 40) | (seq_ << 16) | static_cast<uint64_t>(step);
  }

  absl::Status RunTransfer(const Transfer& t);
  // Runs the ring steps (send right, receive from the left) as one pipeline: chunk c of step g is
  // sent as soon as chunk c of step g-1 has been received (and reduced), not when all of step g-1
  // is done, with up to max_inflight_chunks messages in flight per direction over all steps.
  absl::Status RunRing(absl::Span<const RingStep> steps, DataType type);
  // p > 1 and count > 0; `in` is `out` or does not overlap it.
  absl::Status AllreduceRing(const uint8_t* in, uint8_t* out, size_t count, DataType type,
                             ReduceOp op);
  absl::Status AllgathervRing(const void* send, uint8_t* recv,
                              absl::Span<const size_t> bytes_per_rank);
  absl::Status BroadcastRing(uint8_t* data, size_t bytes, int root);
  absl::Status DisseminationBarrier();

  const int rank_;
  std::vector<std::unique_ptr<transport::Endpoint>> owned_;  // empty for a Subset
  std::vector<transport::Endpoint*> peers_;                  // owned_'s, or the parent's
  uint8_t tag_space_ = 0;
  // The transport that made the endpoints, when given (Connect, Create); null once it turned out
  // not to support WaitForActivity. RunRing waits on it when idle.
  transport::Transport* transport_ = nullptr;
  CommunicatorOptions options_;
  const char* collective_ = "";  // the collective running, for messages
  uint64_t seq_ = 0;             // of the collective running; 24 bits of the tag
  uint64_t next_seq_ = 0;
  std::vector<uint8_t> scratch_;
  absl::Status abort_status_;
};

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_COMMUNICATOR_H_

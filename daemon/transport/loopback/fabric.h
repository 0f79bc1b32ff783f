// loopback::Fabric: the in-process "network" through which the loopback transports of ranks
// 0..p-1 (threads of one process, usually a test) reach each other, with fault-injection hooks.
//
//   loopback::Fabric fabric(/*world_size=*/4);
//   TransportOptions options{.rank = r, .world_size = 4, .context = &fabric};
//   ASSIGN_OR_RETURN(auto transport, loopback::MakeTransport(options));
//
// Delivery is rendezvous-style: a send completes only when the matching receive has been posted
// and the bytes copied, so a collective that would deadlock on a real network with small buffers
// deadlocks here too. Matching and copying happen on the threads that post, Test or Wait.
//
// Faults (any thread, any time; they take effect at once):
//  - CloseRank(r): rank r "dies" visibly: every pending and later operation between r and any peer
//    fails with kUnavailable (like a reset connection).
//  - SilenceRank(r): rank r "hangs": nothing it sends or should receive moves any more, and its own
//    later Close() is not seen by peers; peers only notice by their own timeouts.
//  - FaultAfterMessages(r, n, kind): applies CloseRank or SilenceRank to r as soon as r has
//    completed n sends (counted from construction), i.e. deterministically mid-collective.
//  - SetLinkDrop(src, dst): messages src -> dst complete at the sender and never arrive.
//  - SetLinkDelay(src, dst, d): messages src -> dst become deliverable d after they were posted.
//
// Thread-safety: thread-safe; one mutex guards the matching state (copies run outside it). The
// Fabric must outlive every transport, endpoint and request made through it.
#ifndef GRAVAC_DAEMON_TRANSPORT_LOOPBACK_FABRIC_H_
#define GRAVAC_DAEMON_TRANSPORT_LOOPBACK_FABRIC_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/mutex.h"
#include "daemon/transport/transport.h"

namespace gravac::transport::loopback {

enum class FaultKind { kClose, kSilence };

namespace internal {

// One posted send or receive; shared by its Request and the fabric's queues.
struct Op {
  enum class State { kQueued, kCopying, kDone };
  bool is_send = false;
  int owner = 0;  // the rank that posted it
  int src = 0;    // message direction src -> dst
  int dst = 0;
  uint64_t tag = 0;
  const void* send_data = nullptr;
  void* recv_data = nullptr;
  size_t size = 0;  // send: message size; receive: capacity
  absl::Time deliver_at = absl::InfinitePast();
  State state = State::kQueued;
  absl::Status status;
  size_t bytes = 0;
};

class LoopbackEndpoint;
class LoopbackRequest;
class LoopbackTransport;

}  // namespace internal

class Fabric : public TransportContext {
 public:
  explicit Fabric(int world_size);
  ~Fabric() override = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  int world_size() const { return world_size_; }

  void CloseRank(int rank);
  void SilenceRank(int rank);
  void FaultAfterMessages(int rank, int64_t messages, FaultKind kind);
  void SetLinkDrop(int src, int dst, bool drop);
  void SetLinkDelay(int src, int dst, absl::Duration delay);

  // Sends completed (delivered or dropped) by `rank` so far.
  int64_t messages_sent(int rank) const;

 private:
  friend class internal::LoopbackEndpoint;
  friend class internal::LoopbackRequest;
  friend class internal::LoopbackTransport;
  using OpPtr = std::shared_ptr<internal::Op>;

  struct Channel {  // messages src -> dst
    std::deque<OpPtr> sends;
    std::deque<OpPtr> recvs;
    bool drop = false;
    absl::Duration delay = absl::ZeroDuration();
  };
  struct RankState {
    bool silenced = false;
    int64_t sent = 0;
    int64_t in_copy = 0;  // sends matched and being copied outside the lock
    int64_t fault_after = -1;
    FaultKind fault_kind = FaultKind::kClose;
    std::vector<bool> connected;       // Connect(peer) called
    std::vector<bool> locally_closed;  // this rank's endpoint to peer closed, peer not told
  };
  struct Match {
    OpPtr send;
    OpPtr recv;
  };

  // Used by the loopback transport classes.
  uint64_t id() const { return reinterpret_cast<uintptr_t>(this); }
  absl::Status MarkConnected(int rank, int peer);
  absl::Status Post(const OpPtr& op);
  absl::StatusOr<bool> Test(const OpPtr& op);
  absl::Status Wait(const OpPtr& op, absl::Duration timeout);
  void Cancel(const OpPtr& op);
  void CloseEndpoint(int rank, int peer);

  // All below hold mu_; the ops they touch (their state, status and bytes) are guarded by it too.
  Channel& channel(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return channels_[src * world_size_ + dst];
  }
  bool PairClosed(int a, int b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pair_closed_[a * world_size_ + b];
  }
  void ClosePairLocked(int a, int b, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseRankLocked(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the queued ops (of `owner` only, when >= 0) with kUnavailable and removes them.
  void FailQueued(std::deque<OpPtr>& queue, int owner, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishSendLocked(internal::Op& send) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Matches what can be matched on src -> dst, copies with mu_ released, completes the pairs.
  // Returns the earliest future delivery time that blocks a match (InfiniteFuture if none).
  absl::Time MatchAndCopyLocked(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int world_size_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::vector<RankState> ranks_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> pair_closed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> close_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::transport::loopback

#endif  // GRAVAC_DAEMON_TRANSPORT_LOOPBACK_FABRIC_H_

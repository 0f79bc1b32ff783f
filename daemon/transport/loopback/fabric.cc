#include "daemon/transport/loopback/fabric.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace gravac::transport::loopback {

using internal::Op;

Fabric::Fabric(int world_size)
    : world_size_(std::max(world_size, 1)),
      channels_(world_size_ * world_size_),
      ranks_(world_size_),
      pair_closed_(world_size_ * world_size_, false),
      close_reason_(world_size_ * world_size_) {
  for (RankState& r : ranks_) {
    r.connected.assign(world_size_, false);
    r.locally_closed.assign(world_size_, false);
  }
}

void Fabric::CloseRank(int rank) {
  MutexLock lock(&mu_);
  CloseRankLocked(rank);
}

void Fabric::SilenceRank(int rank) {
  MutexLock lock(&mu_);
  ranks_[rank].silenced = true;
}

void Fabric::FaultAfterMessages(int rank, int64_t messages, FaultKind kind) {
  MutexLock lock(&mu_);
  RankState& r = ranks_[rank];
  r.fault_kind = kind;
  r.fault_after = messages;
  if (r.sent >= messages) {
    r.fault_after = -1;
    if (kind == FaultKind::kClose) {
      CloseRankLocked(rank);
    } else {
      r.silenced = true;
    }
  }
}

void Fabric::SetLinkDrop(int src, int dst, bool drop) {
  MutexLock lock(&mu_);
  channel(src, dst).drop = drop;
}

void Fabric::SetLinkDelay(int src, int dst, absl::Duration delay) {
  MutexLock lock(&mu_);
  channel(src, dst).delay = delay;
}

int64_t Fabric::messages_sent(int rank) const {
  MutexLock lock(&mu_);
  return ranks_[rank].sent;
}

absl::Status Fabric::MarkConnected(int rank, int peer) {
  MutexLock lock(&mu_);
  if (ranks_[rank].connected[peer]) {
    return absl::InvalidArgumentError(
        absl::StrFormat("loopback: rank %d: already connected to peer rank %d", rank, peer));
  }
  ranks_[rank].connected[peer] = true;
  return absl::OkStatus();
}

absl::Status Fabric::Post(const OpPtr& op) {
  MutexLock lock(&mu_);
  const int peer = op->is_send ? op->dst : op->src;
  if (PairClosed(op->owner, peer) || ranks_[op->owner].locally_closed[peer]) {
    return absl::UnavailableError(
        absl::StrFormat("loopback: rank %d: connection to peer rank %d closed (%s)", op->owner,
                        peer, close_reason_[op->owner * world_size_ + peer]));
  }
  Channel& ch = channel(op->src, op->dst);
  if (op->is_send) {
    if (ch.drop && !ranks_[op->src].silenced) {
      op->state = Op::State::kDone;
      op->bytes = op->size;
      FinishSendLocked(*op);
      cv_.SignalAll();
      return absl::OkStatus();
    }
    if (ch.delay > absl::ZeroDuration()) op->deliver_at = absl::Now() + ch.delay;
    ch.sends.push_back(op);
  } else {
    ch.recvs.push_back(op);
  }
  MatchAndCopyLocked(op->src, op->dst);
  return absl::OkStatus();
}

absl::StatusOr<bool> Fabric::Test(const OpPtr& op) {
  MutexLock lock(&mu_);
  if (op->state == Op::State::kQueued) MatchAndCopyLocked(op->src, op->dst);
  if (op->state != Op::State::kDone) return false;
  if (!op->status.ok()) return op->status;
  return true;
}

absl::Status Fabric::Wait(const OpPtr& op, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (true) {
    absl::Time next = absl::InfiniteFuture();
    if (op->state == Op::State::kQueued) next = MatchAndCopyLocked(op->src, op->dst);
    if (op->state == Op::State::kDone) return op->status;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("loopback: rank %d: %s rank %d (tag %d) not complete within %s",
                          op->owner, op->is_send ? "send to" : "receive from",
                          op->is_send ? op->dst : op->src, op->tag, absl::FormatDuration(timeout)));
    }
    const absl::Time wake = std::min(deadline, next);
    cv_.WaitWithDeadline(&mu_, wake);
  }
}

void Fabric::Cancel(const OpPtr& op) {
  MutexLock lock(&mu_);
  if (op->state == Op::State::kQueued) {
    Channel& ch = channel(op->src, op->dst);
    std::deque<OpPtr>& queue = op->is_send ? ch.sends : ch.recvs;
    queue.erase(std::find(queue.begin(), queue.end(), op));
    op->state = Op::State::kDone;
    op->status = absl::CancelledError("loopback: request destroyed while pending");
    return;
  }
  while (op->state != Op::State::kDone) cv_.Wait(&mu_);
}

void Fabric::CloseEndpoint(int rank, int peer) {
  MutexLock lock(&mu_);
  const std::string why = absl::StrFormat("closed by rank %d", rank);
  if (!ranks_[rank].silenced) {
    ClosePairLocked(rank, peer, why);
    return;
  }
  // A silenced rank's close is not seen by its peer: only its own operations fail.
  ranks_[rank].locally_closed[peer] = true;
  close_reason_[rank * world_size_ + peer] = why;
  FailQueued(channel(rank, peer).sends, rank, why);
  FailQueued(channel(peer, rank).recvs, rank, why);
  cv_.SignalAll();
}

void Fabric::ClosePairLocked(int a, int b, const std::string& why) {
  if (PairClosed(a, b)) return;
  pair_closed_[a * world_size_ + b] = pair_closed_[b * world_size_ + a] = true;
  close_reason_[a * world_size_ + b] = close_reason_[b * world_size_ + a] = why;
  for (auto [src, dst] : {std::pair{a, b}, std::pair{b, a}}) {
    FailQueued(channel(src, dst).sends, -1, why);
    FailQueued(channel(src, dst).recvs, -1, why);
  }
  cv_.SignalAll();
}

void Fabric::CloseRankLocked(int rank) {
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer != rank) ClosePairLocked(rank, peer, absl::StrFormat("rank %d closed", rank));
  }
}

void Fabric::FailQueued(std::deque<OpPtr>& queue, int owner, const std::string& why) {
  std::deque<OpPtr> kept;
  for (OpPtr& op : queue) {
    if (owner >= 0 && op->owner != owner) {
      kept.push_back(std::move(op));
      continue;
    }
    const int peer = op->is_send ? op->dst : op->src;
    op->state = Op::State::kDone;
    op->status = absl::UnavailableError(absl::StrFormat(
        "loopback: rank %d: connection to peer rank %d closed (%s)", op->owner, peer, why));
  }
  queue.swap(kept);
}

void Fabric::FinishSendLocked(Op& send) {
  RankState& r = ranks_[send.src];
  ++r.sent;
  if (r.fault_after >= 0 && r.sent >= r.fault_after) {
    r.fault_after = -1;
    if (r.fault_kind == FaultKind::kClose) {
      CloseRankLocked(send.src);
    } else {
      r.silenced = true;
    }
  }
}

absl::Time Fabric::MatchAndCopyLocked(int src, int dst) {
  if (ranks_[src].silenced || ranks_[dst].silenced) return absl::InfiniteFuture();
  Channel& ch = channel(src, dst);
  const absl::Time now = absl::Now();
  absl::Time next = absl::InfiniteFuture();
  std::vector<Match> matches;
  RankState& sender = ranks_[src];
  for (auto recv = ch.recvs.begin(); recv != ch.recvs.end();) {
    // A pending fault fires after exactly fault_after sends: match no more until it has.
    if (sender.fault_after >= 0 && sender.sent + sender.in_copy >= sender.fault_after) break;
    const uint64_t tag = (*recv)->tag;
    auto send = std::find_if(ch.sends.begin(), ch.sends.end(),
                             [tag](const OpPtr& op) { return op->tag == tag; });
    if (send == ch.sends.end()) {
      ++recv;
      continue;
    }
    if ((*send)->deliver_at > now) {  // the oldest message with this tag is still in flight
      next = std::min(next, (*send)->deliver_at);
      ++recv;
      continue;
    }
    (*send)->state = (*recv)->state = Op::State::kCopying;
    ++sender.in_copy;
    matches.push_back({std::move(*send), std::move(*recv)});
    ch.sends.erase(send);
    recv = ch.recvs.erase(recv);
  }
  if (matches.empty()) return next;
  mu_.Unlock();
  for (const Match& m : matches) {
    if (m.send->size <= m.recv->size && m.send->size > 0) {
      std::memcpy(m.recv->recv_data, m.send->send_data, m.send->size);
    }
  }
  mu_.Lock();
  for (const Match& m : matches) {
    m.send->state = m.recv->state = Op::State::kDone;
    m.send->bytes = m.recv->bytes = m.send->size;
    if (m.send->size > m.recv->size) {
      m.recv->status = absl::InvalidArgumentError(absl::StrFormat(
          "loopback: rank %d: message of %d bytes from peer rank %d (tag %d) exceeds the receive "
          "buffer of %d bytes",
          dst, m.send->size, src, m.send->tag, m.recv->size));
    }
    --sender.in_copy;
    FinishSendLocked(*m.send);
  }
  cv_.SignalAll();
  return next;
}

}  // namespace gravac::transport::loopback

#include "daemon/collectives/communicator.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::collectives {
namespace {

using transport::Request;

// Longest single Wait before the loop re-tests every outstanding request.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(2);
// How long RunRing waits in the transport before it starts to sleep between tests.
constexpr absl::Duration kIdleSpin = absl::Microseconds(50);
constexpr absl::Duration kFirstIdleSleep = absl::Microseconds(10);
constexpr int kMaxWorldSize = 1 << 14;  // 2(p-1) steps must fit the 16-bit step field of a tag

size_t NumChunks(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

// One ring step: send_bytes from `send` to send_peer and recv_bytes from recv_peer into `recv`
// (with `reduce`, each chunk lands in scratch and is added into `recv`), chunked and windowed.
struct Communicator::Transfer {
  int send_peer = -1;  // -1: nothing to send
  const uint8_t* send = nullptr;
  size_t send_bytes = 0;
  int recv_peer = -1;  // -1: nothing to receive
  uint8_t* recv = nullptr;
  size_t recv_bytes = 0;
  bool reduce = false;
  DataType type = DataType::kFloat32;
  bool forward = false;  // send chunk k only once chunk k was received (broadcast relay)
  int step = 0;
};

// One step of a pipelined ring (RunRing): this rank sends send_bytes from `send` to its right
// neighbour and receives recv_bytes from its left one into `recv` (with `reduce`, each chunk lands
// in scratch and `recv` becomes `addend` + that chunk; `addend` may be `recv` itself). Step g > 0
// forwards what step g-1 received: chunk c of step g's send range is the range that chunk c of step
// g-1 received into.
struct Communicator::RingStep {
  const uint8_t* send = nullptr;
  size_t send_bytes = 0;
  uint8_t* recv = nullptr;
  size_t recv_bytes = 0;
  bool reduce = false;
  const uint8_t* addend = nullptr;  // reduce steps: recv_bytes to add the received ones to
  // >= 0: chunk c may only be received into `recv` once chunk c of this earlier step's send is
  // complete (the range is the one that send reads).
  int recv_after_send_of = -1;
  // Divide each reduced chunk by `divide_by` (> 1) once it is received (the last reduce step of
  // an average).
  int divide_by = 0;
};

Communicator::Communicator(int rank, std::vector<std::unique_ptr<transport::Endpoint>> peers,
                           const CommunicatorOptions& options)
    : rank_(rank), owned_(std::move(peers)), options_(options) {
  for (auto& peer : owned_) peers_.push_back(peer.get());
  options_.chunk_bytes = std::max<size_t>(8, options_.chunk_bytes & ~size_t{7});
  options_.max_inflight_chunks = std::max(1, options_.max_inflight_chunks);
}

Communicator::Communicator(int rank, std::vector<transport::Endpoint*> peers, uint8_t tag_space,
                           const CommunicatorOptions& options)
    : rank_(rank), peers_(std::move(peers)), tag_space_(tag_space), options_(options) {}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Subset(absl::Span<const int> ranks) {
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size() || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "communicator: rank %d: subset ranks must be distinct, ascending and in 0..%d", rank_,
          size() - 1));
    }
    if (ranks[i] == rank_) me = static_cast<int>(i);
  }
  if (me < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("communicator: rank %d is not in the subset", rank_));
  }
  std::vector<transport::Endpoint*> peers;
  uint32_t hash = 2166136261u;  // FNV-1a of the ranks: the same tag space on every member
  for (int r : ranks) {
    peers.push_back(peers_[r]);
    for (int shift = 0; shift < 32; shift += 8) hash = (hash ^ ((r >> shift) & 0xff)) * 16777619u;
  }
  const uint8_t space = static_cast<uint8_t>(1 + hash % 255);
  auto comm = std::unique_ptr<Communicator>(new Communicator(me, std::move(peers), space, options_));
  comm->transport_ = transport_;
  return comm;
}

Communicator::~Communicator() = default;

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    int rank, std::vector<std::unique_ptr<transport::Endpoint>> peers,
    const CommunicatorOptions& options, transport::Transport* transport) {
  const int p = static_cast<int>(peers.size());
  if (p < 1 || p > kMaxWorldSize || rank < 0 || rank >= p) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "communicator: rank %d in a world of %d (1..%d ranks)", rank, p, kMaxWorldSize));
  }
  for (int r = 0; r < p; ++r) {
    const bool want = r != rank;
    if ((peers[r] != nullptr) != want || (want && peers[r]->peer_rank() != r)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("communicator: rank %d: peers[%d] must be %s", rank, r,
                          want ? "the endpoint to that rank" : "null (this rank)"));
    }
  }
  auto comm = std::unique_ptr<Communicator>(new Communicator(rank, std::move(peers), options));
  comm->transport_ = transport;
  return comm;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Connect(
    transport::Transport& transport, absl::Span<const std::string> addresses,
    const CommunicatorOptions& options) {
  const int p = transport.world_size();
  if (static_cast<int>(addresses.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrFormat("communicator: rank %d: %d addresses for a world of %d", transport.rank(),
                        addresses.size(), p));
  }
  std::vector<std::unique_ptr<transport::Endpoint>> peers(p);
  for (int r = 0; r < p; ++r) {
    if (r == transport.rank()) continue;
    ASSIGN_OR_RETURN(peers[r], transport.Connect(r, addresses[r]));
  }
  return Create(transport.rank(), std::move(peers), options, &transport);
}

absl::Status Communicator::Begin(const char* collective) {
  collective_ = collective;
  seq_ = next_seq_++ & 0xffffffu;
  if (!abort_status_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: %s: communicator aborted by an earlier error: %s", rank_,
                        collective, abort_status_.message()));
  }
  return absl::OkStatus();
}

absl::Status Communicator::Finish(absl::Status status) {
  if (!status.ok() && abort_status_.ok()) {
    abort_status_ = status;
    for (auto& peer : peers_) {
      if (peer != nullptr) peer->Close();
    }
  }
  return status;
}

absl::Status Communicator::RunTransfer(const Transfer& t) {
  const size_t chunk = options_.chunk_bytes;
  const size_t window = static_cast<size_t>(options_.max_inflight_chunks);
  const size_t num_send = t.send_peer < 0 ? 0 : NumChunks(t.send_bytes, chunk);
  const size_t num_recv = t.recv_peer < 0 ? 0 : NumChunks(t.recv_bytes, chunk);
  if (t.reduce && scratch_.size() < window * chunk) scratch_.resize(window * chunk);
  const uint64_t tag = Tag(t.step);
  auto peer_error = [&](int peer, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrFormat("rank %d: %s: peer rank %d: %s", rank_,
                                                  collective_, peer, s.message()));
  };

  std::deque<std::unique_ptr<Request>> sends, recvs;
  size_t posted_send = 0, done_send = 0, posted_recv = 0, done_recv = 0;
  absl::Time last_progress = absl::Now();
  while (done_send < num_send || done_recv < num_recv) {
    for (; posted_recv < num_recv && posted_recv - done_recv < window; ++posted_recv) {
      const size_t offset = posted_recv * chunk;
      uint8_t* dst = t.reduce ? scratch_.data() + (posted_recv % window) * chunk : t.recv + offset;
      auto request = peers_[t.recv_peer]->Irecv(dst, std::min(chunk, t.recv_bytes - offset), tag);
      if (!request.ok()) return peer_error(t.recv_peer, request.status());
      recvs.push_back(*std::move(request));
    }
    for (; posted_send < num_send && posted_send - done_send < window &&
           (!t.forward || posted_send < done_recv);
         ++posted_send) {
      const size_t offset = posted_send * chunk;
      auto request =
          peers_[t.send_peer]->Isend(t.send + offset, std::min(chunk, t.send_bytes - offset), tag);
      if (!request.ok()) return peer_error(t.send_peer, request.status());
      sends.push_back(*std::move(request));
    }

    bool progressed = false;
    while (!recvs.empty()) {
      absl::StatusOr<bool> done = recvs.front()->Test();
      if (!done.ok()) return peer_error(t.recv_peer, done.status());
      if (!*done) break;
      if (t.reduce) {
        const size_t offset = done_recv * chunk;
        const size_t len = std::min(chunk, t.recv_bytes - offset);
        ReduceSumInto(t.type, t.recv + offset, scratch_.data() + (done_recv % window) * chunk,
                      len / DataTypeSize(t.type));
      }
      recvs.pop_front();
      ++done_recv;
      progressed = true;
    }
    while (!sends.empty()) {
      absl::StatusOr<bool> done = sends.front()->Test();
      if (!done.ok()) return peer_error(t.send_peer, done.status());
      if (!*done) break;
      sends.pop_front();
      ++done_send;
      progressed = true;
    }
    if (progressed) {
      last_progress = absl::Now();
      continue;
    }

    const bool on_recv = !recvs.empty();
    if (!on_recv && sends.empty()) {
      return absl::InternalError(
          absl::StrFormat("rank %d: %s: transfer stalled with nothing "
                          "posted",
                          rank_, collective_));
    }
    const int peer = on_recv ? t.recv_peer : t.send_peer;
    const absl::Time now = absl::Now();
    const absl::Time deadline = last_progress + options_.op_timeout;
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: %s: no progress from peer rank %d within %s", rank_,
                          collective_, peer, absl::FormatDuration(options_.op_timeout)));
    }
    Request& head = on_recv ? *recvs.front() : *sends.front();
    absl::Status waited = head.Wait(std::min(deadline - now, kWaitSlice));
    if (!waited.ok() && !absl::IsDeadlineExceeded(waited)) return peer_error(peer, waited);
  }
  return absl::OkStatus();
}

absl::Status Communicator::Allreduce(const void* in, void* out, size_t count, DataType type,
                                     ReduceOp op) {
  RETURN_IF_ERROR(Begin("allreduce"));
  const size_t bytes = count * DataTypeSize(type);
  if (count > 0 && (in == nullptr || out == nullptr)) {
    return Finish(absl::InvalidArgumentError(
        absl::StrFormat("rank %d: allreduce: null buffer for %d elements", rank_, count)));
  }
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (src != dst && src < dst + bytes && dst < src + bytes) {
    return Finish(absl::InvalidArgumentError(
        absl::StrFormat("rank %d: allreduce: input and output overlap partially", rank_)));
  }
  if (size() == 1 || count == 0) {
    if (src != dst && bytes > 0) std::memcpy(dst, src, bytes);
    return Finish(absl::OkStatus());
  }
  return Finish(AllreduceRing(src, dst, count, type, op));
}

absl::Status Communicator::RunRing(absl::Span<const RingStep> steps, DataType type) {
  const int p = size();
  const int left = (rank_ - 1 + p) % p, right = (rank_ + 1) % p;
  const size_t chunk = options_.chunk_bytes;
  const size_t window = static_cast<size_t>(options_.max_inflight_chunks);
  const int num_steps = static_cast<int>(steps.size());
  std::vector<size_t> send_chunks(num_steps), recv_chunks(num_steps);
  bool any_reduce = false;
  for (int g = 0; g < num_steps; ++g) {
    send_chunks[g] = NumChunks(steps[g].send_bytes, chunk);
    recv_chunks[g] = NumChunks(steps[g].recv_bytes, chunk);
    any_reduce = any_reduce || steps[g].reduce;
    if (g > 0 && steps[g].send_bytes != steps[g - 1].recv_bytes) {
      return absl::InternalError(absl::StrFormat(
          "rank %d: %s: ring step %d sends %d bytes but step %d received %d", rank_, collective_,
          g, steps[g].send_bytes, g - 1, steps[g - 1].recv_bytes));
    }
  }
  if (any_reduce && scratch_.size() < window * chunk) scratch_.resize(window * chunk);
  auto peer_error = [&](int peer, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrFormat("rank %d: %s: peer rank %d: %s", rank_,
                                                  collective_, peer, s.message()));
  };

  // A position (step, chunk) in the order in which chunks are posted and complete; `advance` and
  // `normalize` skip steps without chunks, so a cursor at step `num_steps` is the end.
  struct Cursor {
    int step = 0;
    size_t chunk = 0;
    bool After(int g, size_t c) const { return step > g || (step == g && chunk > c); }
  };
  auto normalize = [&](Cursor& at, const std::vector<size_t>& chunks) {
    while (at.step < num_steps && at.chunk >= chunks[at.step]) {
      ++at.step;
      at.chunk = 0;
    }
  };
  auto advance = [&](Cursor& at, const std::vector<size_t>& chunks) {
    ++at.chunk;
    normalize(at, chunks);
  };
  struct InFlight {
    int step;
    size_t chunk;
    uint8_t* scratch;  // reduce steps: where the chunk lands
    std::unique_ptr<Request> request;
  };
  Cursor send_posted, send_done, recv_posted, recv_done;
  normalize(send_posted, send_chunks);
  normalize(send_done, send_chunks);
  normalize(recv_posted, recv_chunks);
  normalize(recv_done, recv_chunks);
  std::deque<InFlight> sends, recvs;
  size_t recv_slot = 0;
  absl::Time last_progress = absl::Now();
  absl::Duration idle_sleep = absl::ZeroDuration();  // zero: spin (Wait) first
  while (send_done.step < num_steps || recv_done.step < num_steps) {
    while (recv_posted.step < num_steps && recvs.size() < window) {
      const RingStep& st = steps[recv_posted.step];
      const size_t c = recv_posted.chunk;
      if (st.recv_after_send_of >= 0 && !send_done.After(st.recv_after_send_of, c)) break;
      const size_t offset = c * chunk;
      uint8_t* landing = st.reduce ? scratch_.data() + (recv_slot++ % window) * chunk : nullptr;
      auto request = peers_[left]->Irecv(landing != nullptr ? landing : st.recv + offset,
                                         std::min(chunk, st.recv_bytes - offset),
                                         Tag(recv_posted.step));
      if (!request.ok()) return peer_error(left, request.status());
      recvs.push_back({recv_posted.step, c, landing, *std::move(request)});
      advance(recv_posted, recv_chunks);
    }
    while (send_posted.step < num_steps && sends.size() < window) {
      const int g = send_posted.step;
      const size_t c = send_posted.chunk;
      if (g > 0 && !recv_done.After(g - 1, c)) break;  // forwards what step g-1 received
      const size_t offset = c * chunk;
      auto request = peers_[right]->Isend(steps[g].send + offset,
                                          std::min(chunk, steps[g].send_bytes - offset), Tag(g));
      if (!request.ok()) return peer_error(right, request.status());
      sends.push_back({g, c, nullptr, *std::move(request)});
      advance(send_posted, send_chunks);
    }

    bool progressed = false;
    while (!recvs.empty()) {
      absl::StatusOr<bool> done = recvs.front().request->Test();
      if (!done.ok()) return peer_error(left, done.status());
      if (!*done) break;
      const InFlight& f = recvs.front();
      const RingStep& st = steps[f.step];
      const size_t offset = f.chunk * chunk;
      const size_t len = std::min(chunk, st.recv_bytes - offset);
      if (st.reduce) {
        ReduceSum(type, st.recv + offset, st.addend + offset, f.scratch, len / DataTypeSize(type));
      }
      if (st.divide_by > 1) {
        DivideInPlace(type, st.recv + offset, len / DataTypeSize(type), st.divide_by);
      }
      recvs.pop_front();
      advance(recv_done, recv_chunks);
      progressed = true;
    }
    while (!sends.empty()) {
      absl::StatusOr<bool> done = sends.front().request->Test();
      if (!done.ok()) return peer_error(right, done.status());
      if (!*done) break;
      sends.pop_front();
      advance(send_done, send_chunks);
      progressed = true;
    }
    if (progressed) {
      last_progress = absl::Now();
      idle_sleep = absl::ZeroDuration();
      continue;
    }

    const bool on_recv = !recvs.empty();
    if (!on_recv && sends.empty()) {
      return absl::InternalError(absl::StrFormat(
          "rank %d: %s: ring stalled with nothing posted (send step %d, receive step %d)", rank_,
          collective_, send_posted.step, recv_posted.step));
    }
    const int peer = on_recv ? left : right;
    const absl::Time now = absl::Now();
    const absl::Time deadline = last_progress + options_.op_timeout;
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: %s: no progress from peer rank %d within %s", rank_,
                          collective_, peer, absl::FormatDuration(options_.op_timeout)));
    }
    if (transport_ != nullptr) {
      // Block in the transport until the network has something for any of the requests.
      absl::Status waited = transport_->WaitForActivity(std::min(deadline - now, kWaitSlice));
      if (waited.ok()) continue;
      if (!absl::IsUnimplemented(waited)) return peer_error(peer, waited);
      transport_ = nullptr;  // the backend cannot: wait on the head request and sleep below
    }
    if (idle_sleep > absl::ZeroDuration()) {
      absl::SleepFor(std::min(idle_sleep, deadline - now));
      idle_sleep = std::min(2 * idle_sleep, options_.max_idle_sleep);
      continue;
    }
    Request& head = on_recv ? *recvs.front().request : *sends.front().request;
    const bool sleep_next = options_.max_idle_sleep > absl::ZeroDuration();
    absl::Status waited =
        head.Wait(std::min(deadline - now, sleep_next ? kIdleSpin : kWaitSlice));
    if (!waited.ok() && !absl::IsDeadlineExceeded(waited)) return peer_error(peer, waited);
    if (sleep_next) idle_sleep = std::min(kFirstIdleSleep, options_.max_idle_sleep);
  }
  return absl::OkStatus();
}

absl::Status Communicator::AllreduceRing(const uint8_t* in, uint8_t* out, size_t count,
                                         DataType type, ReduceOp op) {
  const int p = size();
  const size_t elem = DataTypeSize(type);
  const size_t base = count / p, extra = count % p;
  auto seg = [&](int i) { return (i % p + p) % p; };
  auto seg_bytes = [&](int i) {
    return (base + (static_cast<size_t>(seg(i)) < extra ? 1 : 0)) * elem;
  };
  auto seg_offset = [&](int i) { return (seg(i) * base + std::min<size_t>(seg(i), extra)) * elem; };
  auto seg_ptr = [&](int i) { return out + seg_offset(i); };
  std::vector<RingStep> steps;
  steps.reserve(2 * (p - 1));
  // Reduce-scatter: at step s rank r sends segment r-s and adds segment r-s-1 of its input to the
  // one received, into `out`, so it ends owning segment r+1 (divided by p at the last step for an
  // average). Step 0 sends its own segment straight from `in`; every later send forwards a sum in
  // `out`. Out of place, `out` is thus never a copy of `in`: each segment of it is first written
  // by a reduction (every segment but r) or by the allgather (segment r, its first receive).
  for (int s = 0; s < p - 1; ++s) {
    steps.push_back({.send = s == 0 ? in + seg_offset(rank_) : seg_ptr(rank_ - s),
                     .send_bytes = seg_bytes(rank_ - s),
                     .recv = seg_ptr(rank_ - s - 1),
                     .recv_bytes = seg_bytes(rank_ - s - 1),
                     .reduce = true,
                     .addend = in + seg_offset(rank_ - s - 1),
                     .divide_by = op == ReduceOp::kAverage && s == p - 2 ? p : 0});
  }
  // Allgather: at step s rank r forwards segment r+1-s and receives segment r-s, the range that
  // reduce-scatter step s sent: a chunk is received only once that send is complete.
  for (int s = 0; s < p - 1; ++s) {
    steps.push_back({.send = seg_ptr(rank_ + 1 - s),
                     .send_bytes = seg_bytes(rank_ + 1 - s),
                     .recv = seg_ptr(rank_ - s),
                     .recv_bytes = seg_bytes(rank_ - s),
                     .recv_after_send_of = s});
  }
  return RunRing(steps, type);
}

absl::Status Communicator::Allgatherv(const void* send, void* recv,
                                      absl::Span<const size_t> bytes_per_rank) {
  RETURN_IF_ERROR(Begin("allgatherv"));
  if (static_cast<int>(bytes_per_rank.size()) != size()) {
    return Finish(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: allgatherv: %d sizes for %d ranks", rank_, bytes_per_rank.size(), size())));
  }
  size_t total = 0;
  for (size_t b : bytes_per_rank) total += b;
  if ((bytes_per_rank[rank_] > 0 && send == nullptr) || (total > 0 && recv == nullptr)) {
    return Finish(absl::InvalidArgumentError(
        absl::StrFormat("rank %d: allgatherv: null buffer for %d bytes", rank_, total)));
  }
  return Finish(AllgathervRing(send, static_cast<uint8_t*>(recv), bytes_per_rank));
}

absl::Status Communicator::AllgathervRing(const void* send, uint8_t* recv,
                                          absl::Span<const size_t> bytes_per_rank) {
  const int p = size();
  std::vector<size_t> offset(p + 1, 0);
  for (int i = 0; i < p; ++i) offset[i + 1] = offset[i] + bytes_per_rank[i];
  if (bytes_per_rank[rank_] > 0) std::memmove(recv + offset[rank_], send, bytes_per_rank[rank_]);
  if (p == 1) return absl::OkStatus();
  // At step s rank r forwards block r-s and receives block r-s-1 (never a block it sends before
  // receiving it, so no receive waits on a send).
  std::vector<RingStep> steps;
  steps.reserve(p - 1);
  for (int s = 0; s < p - 1; ++s) {
    const int send_block = (rank_ - s + p) % p, recv_block = (rank_ - s - 1 + p) % p;
    steps.push_back({.send = recv + offset[send_block],
                     .send_bytes = bytes_per_rank[send_block],
                     .recv = recv + offset[recv_block],
                     .recv_bytes = bytes_per_rank[recv_block]});
  }
  return RunRing(steps, DataType::kFloat32);
}

absl::Status Communicator::AllgathervAnySize(absl::Span<const uint8_t> send,
                                             std::vector<uint8_t>* recv,
                                             std::vector<size_t>* bytes_per_rank) {
  const int p = size();
  std::vector<uint64_t> sizes(p);
  const uint64_t mine = send.size();
  RETURN_IF_ERROR(Allgatherv(&mine, sizes.data(), std::vector<size_t>(p, sizeof(uint64_t))));
  bytes_per_rank->assign(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t b : *bytes_per_rank) total += b;
  recv->resize(total);
  return Allgatherv(send.data(), recv->data(), *bytes_per_rank);
}

absl::Status Communicator::Broadcast(void* data, size_t bytes, int root) {
  RETURN_IF_ERROR(Begin("broadcast"));
  if (root < 0 || root >= size() || (bytes > 0 && data == nullptr)) {
    return Finish(absl::InvalidArgumentError(
        absl::StrFormat("rank %d: broadcast: root %d of %d ranks, %d bytes at %p", rank_, root,
                        size(), bytes, data)));
  }
  return Finish(BroadcastRing(static_cast<uint8_t*>(data), bytes, root));
}

absl::Status Communicator::BroadcastRing(uint8_t* data, size_t bytes, int root) {
  const int p = size();
  const int position = (rank_ - root + p) % p;  // 0 at the root, p-1 at the ring's end
  Transfer t{.send_peer = position < p - 1 ? (rank_ + 1) % p : -1,
             .send = data,
             .send_bytes = bytes,
             .recv_peer = position > 0 ? (rank_ - 1 + p) % p : -1,
             .recv = data,
             .recv_bytes = bytes,
             .forward = position > 0,
             .step = 0};
  return RunTransfer(t);
}

absl::Status Communicator::Barrier() {
  RETURN_IF_ERROR(Begin("barrier"));
  return Finish(DisseminationBarrier());
}

absl::Status Communicator::DisseminationBarrier() {
  const int p = size();
  uint8_t out_token = 1, in_token = 0;
  for (int distance = 1, step = 0; distance < p; distance *= 2, ++step) {
    Transfer t{.send_peer = (rank_ + distance) % p,
               .send = &out_token,
               .send_bytes = 1,
               .recv_peer = (rank_ - distance + p) % p,
               .recv = &in_token,
               .recv_bytes = 1,
               .step = step};
    RETURN_IF_ERROR(RunTransfer(t));
  }
  return absl::OkStatus();
}

}  // namespace gravac::collectives

// Coordinator: join rounds (membership, validation, the reply every joiner gets).
#include "controller/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gravac::controller {
namespace {

std::string Describe(const JoinRequestInfo& r) {
  return absl::StrFormat("node '%s' (ranks %d..%d of %d)", r.node_name, r.first_rank,
                         r.first_rank + r.local_count - 1, r.world_size);
}

// Rank ranges of [0, world) that no joiner covers, as "a..b" pieces.
std::string MissingRanks(const std::vector<std::pair<int, int>>& covered_sorted, int world) {
  std::vector<std::string> gaps;
  int next = 0;
  for (const auto& [first, count] : covered_sorted) {
    if (first > next) gaps.push_back(absl::StrFormat("%d..%d", next, first - 1));
    next = std::max(next, first + count);
  }
  if (next < world) gaps.push_back(absl::StrFormat("%d..%d", next, world - 1));
  return gaps.empty() ? "none" : absl::StrJoin(gaps, ", ");
}

}  // namespace

JoinReply Coordinator::MakeReply(int node_rank) const {
  JoinReply reply;
  reply.node_rank = node_rank;
  reply.nodes = nodes_;
  reply.world_size = world_size_;
  reply.job = MakeJobConfig();
  reply.decision = current_;
  return reply;
}

absl::Status Coordinator::CheckJoiner(const JoinRequestInfo& r) const {
  if (r.node_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("join: node_name is empty (first_rank %d)", r.first_rank));
  }
  if (r.world_size < 1 || r.local_count < 1 || r.first_rank < 0 ||
      r.first_rank + r.local_count > r.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "join: %s: first_rank/local_count/world_size do not describe ranks inside the world",
        Describe(r)));
  }
  for (const Joiner& j : joiners_) {
    const JoinRequestInfo& o = j.request;
    if (o.data_plane_protocol != r.data_plane_protocol) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "join: the daemons run different gravac builds: node '%s' speaks data-plane protocol "
          "%d, node '%s' protocol %d (0 = a build from before 2026-12-03); run the same build on "
          "every node",
          o.node_name, o.data_plane_protocol, r.node_name, r.data_plane_protocol));
    }
    if (o.world_size != r.world_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("join: world_size disagrees: node '%s' says %d, node '%s' says %d",
                          o.node_name, o.world_size, r.node_name, r.world_size));
    }
    if (o.node_name == r.node_name) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "join: duplicate node_name '%s' (ranks %d..%d and %d..%d)", r.node_name, o.first_rank,
          o.first_rank + o.local_count - 1, r.first_rank, r.first_rank + r.local_count - 1));
    }
    if (r.first_rank < o.first_rank + o.local_count &&
        o.first_rank < r.first_rank + r.local_count) {
      return absl::InvalidArgumentError(
          absl::StrFormat("join: overlapping ranks: %s and %s", Describe(o), Describe(r)));
    }
  }
  return absl::OkStatus();
}

std::optional<int> Coordinator::MatchAssembled(const JoinRequestInfo& r) const {
  for (const NodeEntry& n : nodes_) {
    if (r.rejoin && n.node_rank != r.node_rank) continue;
    if (n.node_name == r.node_name && n.first_rank == r.first_rank &&
        n.local_count == r.local_count && r.world_size == world_size_ &&
        r.data_plane_protocol == data_plane_protocol_) {
      return n.node_rank;
    }
  }
  return std::nullopt;
}

int64_t Coordinator::Join(const JoinRequestInfo& request, JoinCallback done) {
  absl::MutexLock lock(&mu_);
  const int64_t ticket = next_ticket_++;
  if (shut_down_) {
    done(absl::UnavailableError("join: the controller is shutting down"));
    return ticket;
  }
  if (!nodes_.empty()) {
    if (std::optional<int> rank = MatchAssembled(request)) {
      done(MakeReply(*rank));
      return ticket;
    }
    done(absl::FailedPreconditionError(absl::StrFormat(
        "join: the job is already assembled (%d nodes, world size %d) and has no %s%s",
        static_cast<int>(nodes_.size()), world_size_, Describe(request),
        request.rejoin ? absl::StrFormat(" at node rank %d", request.node_rank) : "")));
    return ticket;
  }
  if (absl::Status s = CheckJoiner(request); !s.ok()) {
    joiners_.push_back({ticket, request, std::move(done)});
    FailRound(s);
    return ticket;
  }
  if (joiners_.empty()) round_started_ = absl::Now();
  joiners_.push_back({ticket, request, std::move(done)});
  NotifyMembership();
  if (options_.log != nullptr) {
    GRAVAC_LOG(*options_.log, kInfo, "join %d/%d: %s%s", static_cast<int>(joiners_.size()),
               options_.nodes, Describe(request), request.rejoin ? " (re-join)" : "");
  }
  int covered = 0;
  std::vector<std::pair<int, int>> ranges;
  for (const Joiner& j : joiners_) {
    covered += j.request.local_count;
    ranges.emplace_back(j.request.first_rank, j.request.local_count);
  }
  std::sort(ranges.begin(), ranges.end());
  const int world = request.world_size;
  const int joined = static_cast<int>(joiners_.size());
  if (joined == options_.nodes && covered != world) {
    FailRound(absl::InvalidArgumentError(
        absl::StrFormat("join: all %d nodes joined but ranks %s of world size %d are missing",
                        joined, MissingRanks(ranges, world), world)));
  } else if (joined < options_.nodes && covered == world) {
    FailRound(absl::InvalidArgumentError(absl::StrFormat(
        "join: %d nodes cover all %d ranks but the controller expects %d nodes (--nodes)", joined,
        world, options_.nodes)));
  } else if (joined == options_.nodes) {
    CompleteRound();
  }
  return ticket;
}

void Coordinator::FailRound(const absl::Status& status) {
  if (options_.log != nullptr && !joiners_.empty()) {
    GRAVAC_LOG(*options_.log, kError, "%s", status.ToString());
  }
  std::vector<Joiner> joiners = std::move(joiners_);
  joiners_.clear();
  NotifyMembership();
  for (Joiner& j : joiners) j.done(status);
}

void Coordinator::CompleteRound() {
  std::vector<Joiner> joiners = std::move(joiners_);
  joiners_.clear();
  std::sort(joiners.begin(), joiners.end(), [](const Joiner& a, const Joiner& b) {
    return a.request.first_rank < b.request.first_rank;
  });
  int64_t max_epoch = 0;
  int64_t max_step = -1;
  bool rejoin = false;
  for (size_t i = 0; i < joiners.size(); ++i) {
    const JoinRequestInfo& r = joiners[i].request;
    if (r.rejoin && r.node_rank != static_cast<int>(i)) {
      joiners_ = std::move(joiners);
      FailRound(absl::InvalidArgumentError(
          absl::StrFormat("join: %s re-joins as node rank %d but its ranks make it node rank %d",
                          Describe(r), r.node_rank, static_cast<int>(i))));
      return;
    }
    rejoin = rejoin || r.rejoin;
    max_epoch = std::max(max_epoch, r.newest_epoch);
    max_step = std::max(max_step, r.last_step);
  }
  world_size_ = joiners.front().request.world_size;
  data_plane_protocol_ = joiners.front().request.data_plane_protocol;
  for (size_t i = 0; i < joiners.size(); ++i) {
    const JoinRequestInfo& r = joiners[i].request;
    NodeEntry entry{static_cast<int>(i), r.node_name, r.first_rank, r.local_count,
                    r.transport_address};
    nodes_.push_back(entry);
    node_status_.push_back({entry, false, -1, 0});
  }
  NotifyMembership();
  if (rejoin && max_epoch > 0) {
    // A restarted controller: the daemons hold epochs up to max_epoch from the previous one.
    // Publish this controller's policy decision above them so every daemon follows it.
    epoch_base_ = max_epoch;
    last_observed_ = max_step;
    current_ = FromPolicy(policy_.current(), epoch_base_ + 1);
    current_.first_step = max_step + 1;
  }
  if (options_.log != nullptr) {
    GRAVAC_LOG(*options_.log, kInfo, "job assembled: %d nodes, world size %d%s",
               static_cast<int>(nodes_.size()), world_size_,
               rejoin ? absl::StrFormat(" (re-joined; daemons held epochs up to %d, continuing at "
                                        "epoch %d)",
                                        max_epoch, current_.epoch)
                      : "");
  }
  for (Joiner& j : joiners) {
    int rank = 0;
    for (const NodeEntry& n : nodes_) {
      if (n.first_rank == j.request.first_rank) rank = n.node_rank;
    }
    j.done(MakeReply(rank));
  }
  if (current_.epoch > 0) Publish(current_);
}

void Coordinator::ContinueEpochsAbove(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch <= epoch_base_) return;
  epoch_base_ = epoch;
  current_ = FromPolicy(policy_.current(), epoch_base_ + 1);
}

void Coordinator::CancelJoin(int64_t ticket) {
  absl::MutexLock lock(&mu_);
  for (auto it = joiners_.begin(); it != joiners_.end(); ++it) {
    if (it->ticket != ticket) continue;
    JoinCallback done = std::move(it->done);
    if (options_.log != nullptr) {
      GRAVAC_LOG(*options_.log, kWarning, "join: %s went away before the job assembled",
                 Describe(it->request));
    }
    joiners_.erase(it);
    NotifyMembership();
    done(absl::CancelledError("join: cancelled by the joiner"));
    return;
  }
}

void Coordinator::ExpireJoins(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (joiners_.empty() || now - round_started_ < options_.join_timeout) return;
  std::vector<std::pair<int, int>> ranges;
  std::vector<std::string> names;
  for (const Joiner& j : joiners_) {
    ranges.emplace_back(j.request.first_rank, j.request.local_count);
    names.push_back(j.request.node_name);
  }
  std::sort(ranges.begin(), ranges.end());
  const int world = joiners_.front().request.world_size;
  FailRound(absl::DeadlineExceededError(absl::StrFormat(
      "join: the job did not assemble within %s: %d of %d nodes joined (%s); ranks %s of world "
      "size %d are missing",
      absl::FormatDuration(options_.join_timeout), static_cast<int>(joiners_.size()),
      options_.nodes, absl::StrJoin(names, ", "), MissingRanks(ranges, world), world)));
}

}  // namespace gravac::controller

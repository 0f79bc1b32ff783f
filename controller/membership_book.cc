#include "controller/membership_book.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"

namespace gravac::controller {
namespace {

std::string Names(const std::vector<std::string>& names) {
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

std::string MembershipBook::RunIdOf(const std::string& base_run_id, int64_t version) {
  if (version == 0) return base_run_id;
  return base_run_id.empty() ? absl::StrFormat("m%d", version)
                             : absl::StrFormat("%s.m%d", base_run_id, version);
}

absl::Status MembershipBook::LoadFirst(const JobId& job, Book& book) const {
  if (!book.members.empty()) return absl::OkStatus();
  absl::StatusOr<JobSummaryInfo> first = jobs_->Status(job.name, job.run_id);
  if (!first.ok() || first->id.run_id != job.run_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "regroup: %s is not known to the controller (its first membership never joined, or the "
        "job was forgotten)",
        job.ToString()));
  }
  if (!first->status.assembled) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "regroup: %s never assembled its first membership", job.ToString()));
  }
  for (const NodeStatusInfo& n : first->status.nodes) {
    book.members.push_back({n.entry.node_name, n.entry.local_count});
  }
  return absl::OkStatus();
}

bool MembershipBook::Asked(const Book& book, const std::string& name) const {
  return std::any_of(book.askers.begin(), book.askers.end(),
                     [&](const Asker& a) { return a.info.node_name == name; });
}

bool MembershipBook::NewNodesArrived(const Book& book) const {
  return std::all_of(book.expected.begin(), book.expected.end(),
                     [&](const std::string& name) { return Asked(book, name); });
}

bool MembershipBook::RoundFull(const Book& book) const {
  if (!book.round_started.has_value()) return false;  // only new nodes asked so far
  if (!book.expected.empty()) return NewNodesArrived(book);
  for (const Member& m : book.members) {
    if (!Asked(book, m.name)) return false;
  }
  return true;
}

int64_t MembershipBook::Regroup(const RegroupInfo& request, RegroupCallback done) {
  const JobId job = request.job.Normalized();
  std::vector<Reply> replies;
  int64_t ticket = 0;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    Book& book = books_[job];
    const std::string who =
        absl::StrFormat("regroup: node '%s' of %s", request.node_name, job.ToString());
    if (book.failed.has_value()) {
      refused = *book.failed;
    } else if (request.node_name.empty() || request.local_count < 1) {
      refused = absl::InvalidArgumentError(absl::StrFormat(
          "%s: a node name and a local count >= 1 are needed (local count %d)", who,
          request.local_count));
    } else if (absl::Status loaded = LoadFirst(job, book); !loaded.ok()) {
      refused = loaded;
    } else if (request.from_version >= 0 && request.from_version < book.version) {
      refused = absl::FailedPreconditionError(absl::StrFormat(
          "%s asks to regroup from membership %d, but the job is at membership %d (run '%s'): "
          "a stale membership; this node's workers missed the change and must be restarted",
          who, request.from_version, book.version, RunIdOf(job.run_id, book.version)));
    } else if (request.from_version > book.version || request.from_version < -1) {
      refused = absl::InvalidArgumentError(absl::StrFormat(
          "%s asks to regroup from membership %d, which the job never had (it is at %d)", who,
          request.from_version, book.version));
    } else if (std::any_of(book.askers.begin(), book.askers.end(), [&](const Asker& a) {
                 return a.info.node_name == request.node_name;
               })) {
      refused = absl::InvalidArgumentError(
          absl::StrFormat("%s asked twice for membership %d", who, book.version + 1));
    } else {
      ticket = next_ticket_++;
      if (request.from_version >= 0 && !book.round_started.has_value()) {
        book.round_started = absl::Now();
      }
      book.expected.insert(request.expect_nodes.begin(), request.expect_nodes.end());
      book.askers.push_back({ticket, request, std::move(done)});
      if (log_ != nullptr) {
        GRAVAC_LOG(*log_, kInfo, "%s (%d workers) asks for membership %d (%d of %d nodes asked)",
                   who, request.local_count, book.version + 1,
                   static_cast<int>(book.askers.size()), static_cast<int>(book.members.size()));
      }
      if (RoundFull(book)) Complete(job, book, replies);
    }
  }
  if (!refused.ok()) {
    if (log_ != nullptr) GRAVAC_LOG(*log_, kWarning, "%s", refused.message());
    done(refused);
    return 0;
  }
  for (Reply& r : replies) r.first(std::move(r.second));
  return ticket;
}

void MembershipBook::Cancel(int64_t ticket) {
  RegroupCallback done;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [job, book] : books_) {
      auto it = std::find_if(book.askers.begin(), book.askers.end(),
                             [&](const Asker& a) { return a.ticket == ticket; });
      if (it == book.askers.end()) continue;
      done = std::move(it->done);
      book.askers.erase(it);
      break;
    }
  }
  if (done) done(absl::CancelledError("regroup: cancelled by the node"));
}

void MembershipBook::Tick(absl::Time now) {
  std::vector<Reply> replies;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [job, book] : books_) {
      if (book.askers.empty() || !book.round_started.has_value()) continue;
      const absl::Duration waited = now - *book.round_started;
      // Past regroup_timeout the members that did not ask are lost; named new nodes still
      // starting get up to new_node_wait.
      if (waited >= regroup_timeout_ &&
          (NewNodesArrived(book) || waited >= std::max(regroup_timeout_, new_node_wait_))) {
        Complete(job, book, replies);
      }
    }
  }
  for (Reply& r : replies) r.first(std::move(r.second));
}

void MembershipBook::Complete(const JobId& job, Book& book, std::vector<Reply>& replies) {
  std::vector<Asker> askers = std::move(book.askers);
  book.askers.clear();
  book.expected.clear();
  book.round_started.reset();
  // Survivors in their old node order, then new nodes in arrival order.
  std::vector<const Asker*> order;
  std::vector<std::string> lost;
  for (const Member& m : book.members) {
    auto it = std::find_if(askers.begin(), askers.end(),
                           [&](const Asker& a) { return a.info.node_name == m.name; });
    if (it == askers.end()) {
      lost.push_back(m.name);
    } else {
      order.push_back(&*it);
    }
  }
  const size_t survivors = order.size();
  for (const Asker& a : askers) {
    if (std::find(order.begin(), order.end(), &a) == order.end()) order.push_back(&a);
  }
  int min_size = 1;
  int max_size = 0;
  for (const Asker& a : askers) {
    min_size = std::max(min_size, a.info.min_size);
    if (a.info.max_size > 0) max_size = max_size == 0 ? a.info.max_size
                                                       : std::min(max_size, a.info.max_size);
  }
  auto world_of = [&] {
    int w = 0;
    for (const Asker* a : order) w += a->info.local_count;
    return w;
  };
  // New nodes beyond max_size ranks are not admitted (the newest first).
  std::vector<const Asker*> refused;
  while (max_size > 0 && order.size() > survivors && world_of() > max_size) {
    refused.push_back(order.back());
    order.pop_back();
  }
  const int world = world_of();
  std::vector<std::string> names;
  for (const Asker* a : order) names.push_back(a->info.node_name);
  const int64_t next = book.version + 1;
  if (world < min_size) {
    absl::Status failed = absl::FailedPreconditionError(absl::StrFormat(
        "%s: membership %d would have %d ranks (nodes: %s), below the minimum of %d (--min-np); "
        "lost nodes: %s. The job ends.",
        job.ToString(), next, world, Names(names), min_size, Names(lost)));
    if (log_ != nullptr) GRAVAC_LOG(*log_, kError, "%s", failed.message());
    book.failed = failed;
    for (Asker& a : askers) replies.emplace_back(std::move(a.done), failed);
    return;
  }
  // The previous membership's newest epoch: the new run's decisions continue above it.
  int64_t epoch_base = 0;
  if (absl::StatusOr<JobSummaryInfo> prev =
          jobs_->Status(job.name, RunIdOf(job.run_id, book.version));
      prev.ok()) {
    epoch_base = std::max(prev->status.decision.epoch, prev->status.epoch_base);
  }
  const JobId next_id{job.name, RunIdOf(job.run_id, next)};
  absl::StatusOr<std::shared_ptr<Coordinator>> made =
      jobs_->ForJoin(next_id, static_cast<int>(order.size()));
  if (!made.ok()) {
    for (Asker& a : askers) replies.emplace_back(std::move(a.done), made.status());
    return;
  }
  (*made)->ContinueEpochsAbove(epoch_base);
  MembershipInfo info;
  info.version = next;
  info.run_id = next_id.run_id;
  info.world_size = world;
  info.lost_nodes = lost;
  info.epoch_base = epoch_base;
  int first_rank = 0;
  std::vector<Member> members;
  for (size_t i = 0; i < order.size(); ++i) {
    const RegroupInfo& r = order[i]->info;
    info.nodes.push_back({static_cast<int>(i), r.node_name, first_rank, r.local_count, ""});
    members.push_back({r.node_name, r.local_count});
    if (i >= survivors) info.added_nodes.push_back(r.node_name);
    first_rank += r.local_count;
  }
  book.version = next;
  book.members = std::move(members);
  if (log_ != nullptr) {
    GRAVAC_LOG(*log_, kInfo,
               "%s: membership %d (run '%s'): %d nodes (%s), world size %d; lost: %s; added: %s; "
               "decision epochs continue above %d",
               job.ToString(), next, next_id.run_id, static_cast<int>(order.size()),
               Names(names), world, Names(lost), Names(info.added_nodes), epoch_base);
  }
  for (Asker& a : askers) {
    auto it = std::find(order.begin(), order.end(), &a);
    if (it == order.end()) {
      replies.emplace_back(
          std::move(a.done),
          absl::FailedPreconditionError(absl::StrFormat(
              "regroup: node '%s' of %s was not admitted to membership %d: the job is at its "
              "maximum of %d ranks (--max-np)",
              a.info.node_name, job.ToString(), next, max_size)));
      continue;
    }
    MembershipInfo mine = info;
    mine.node_rank = static_cast<int>(it - order.begin());
    replies.emplace_back(std::move(a.done), std::move(mine));
  }
}

}  // namespace gravac::controller

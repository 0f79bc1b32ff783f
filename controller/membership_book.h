// MembershipBook: the versioned memberships of elastic jobs (issue 22), kept by the controller.
//
// A job's membership 0 is the one its first run assembled (JobRegistry: run `run_id`). When the
// membership breaks (a node lost: a data-plane peer failed, so the workers' collectives failed)
// or changes (nodes added), the daemons of the nodes that go on ask for the next membership
// (Regroup, with the version they were in). A round for version v + 1 completes when every node
// of version v asked, or `regroup_timeout` after the first asker: nodes of v that did not ask by
// then are lost. New nodes (from_version -1) asking before the round completes are added after
// the surviving ones (until max_size ranks); a new node's ask alone neither starts a round nor its
// clock (it waits for the members' next round: a job grows at a membership change, never by
// dropping every member that did not hear of the new node).
//
// Host updates (gravacrun --host-discovery-script): members that ask with `expect_nodes` name
// every node the next membership should hold. The round then completes as soon as all of those
// asked: members not named (removed hosts) are not waited for, and named new nodes are waited for
// past `regroup_timeout`, up to `new_node_wait` after the first member asked (a new node's workers
// start while the members already regroup); a named member that does not ask is lost at
// `regroup_timeout` as before. Nodes are numbered densely in the order of their
// previous node rank, new ones after, and ranks follow node order (node-major), so ranks are
// dense again. Version v + 1 runs as the job's run `RunIdOf(run_id, v + 1)`: a fresh
// Coordinator, made here, whose decision epochs continue above the newest epoch of version v
// (Coordinator::ContinueEpochsAbove), so epochs keep growing across memberships while the
// policy's trackers and search restart (docs/ELASTIC.md says why).
//
// Errors, each given to every asker of the round (never a partial membership): a round below
// min_size ranks fails with FailedPrecondition naming the lost nodes (the job ends); a
// from_version older than the job's current version is stale (FailedPrecondition naming both;
// the asker's workers must restart, they cannot join a membership they missed); a version the
// job never had, a node asking twice in one round, or a bad local count are InvalidArgument.
// Once a round failed below min_size the job's book stays failed: later askers get the same.
//
// Thread-safety: every method is thread-safe. Callbacks run without the book's mutex held.
#ifndef GRAVAC_CONTROLLER_MEMBERSHIP_BOOK_H_
#define GRAVAC_CONTROLLER_MEMBERSHIP_BOOK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/coordinator.h"
#include "controller/job_registry.h"
#include "core/job_id.h"
#include "core/logging.h"

namespace gravac::controller {

struct RegroupInfo {
  JobId job;  // the job's first run (membership 0)
  std::string node_name;
  int local_count = 0;
  int64_t from_version = 0;  // -1: a new node
  int min_size = 0;          // 0 = 1
  int max_size = 0;          // 0 = no limit
  std::vector<std::string> expect_nodes;  // after a host update: the next membership's nodes
};

struct MembershipInfo {
  int64_t version = 0;
  std::string run_id;
  int node_rank = 0;            // the asker's
  std::vector<NodeEntry> nodes;  // by node rank; no transport addresses
  int world_size = 0;
  std::vector<std::string> lost_nodes;
  std::vector<std::string> added_nodes;
  int64_t epoch_base = 0;
};

using RegroupCallback = std::function<void(absl::StatusOr<MembershipInfo>)>;

class MembershipBook {
 public:
  // `jobs` must outlive the book.
  MembershipBook(JobRegistry* jobs, absl::Duration regroup_timeout, Logger* log,
                 absl::Duration new_node_wait = absl::Seconds(60))
      : jobs_(jobs), regroup_timeout_(regroup_timeout), new_node_wait_(new_node_wait), log_(log) {}

  // The run id of membership `version` of a job whose first run is `base_run_id`.
  static std::string RunIdOf(const std::string& base_run_id, int64_t version);

  // Registers an asker; `done` runs exactly once (inline for an error found at once). Returns a
  // ticket for Cancel (0 when `done` already ran).
  int64_t Regroup(const RegroupInfo& request, RegroupCallback done);
  // The asker went away before the round completed (its callback runs with Cancelled).
  void Cancel(int64_t ticket);
  // Completes the rounds whose first asker came before now - regroup_timeout.
  void Tick(absl::Time now);

 private:
  struct Member {
    std::string name;
    int local_count = 0;
  };
  struct Asker {
    int64_t ticket = 0;
    RegroupInfo info;
    RegroupCallback done;
  };
  struct Book {
    int64_t version = 0;
    std::vector<Member> members;  // of `version`, by node rank
    std::vector<Asker> askers;    // the round for version + 1
    std::set<std::string> expected;  // the union of the askers' expect_nodes
    std::optional<absl::Time> round_started;  // when the first member (from_version >= 0) asked
    std::optional<absl::Status> failed;  // below min_size: the job ended
  };
  using Reply = std::pair<RegroupCallback, absl::StatusOr<MembershipInfo>>;

  // Loads membership 0 from the registry (the job's first run) when the book is new.
  absl::Status LoadFirst(const JobId& job, Book& book) const;
  // Completes `book`'s round; the answers go to `replies`.
  void Complete(const JobId& job, Book& book, std::vector<Reply>& replies)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RoundFull(const Book& book) const;
  bool Asked(const Book& book, const std::string& name) const;
  // Every expected node that is not a member asked.
  bool NewNodesArrived(const Book& book) const;

  JobRegistry* const jobs_;
  const absl::Duration regroup_timeout_;
  const absl::Duration new_node_wait_;
  Logger* const log_;
  absl::Mutex mu_;
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<JobId, Book> books_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_MEMBERSHIP_BOOK_H_

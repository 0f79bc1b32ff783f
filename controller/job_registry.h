// JobRegistry: the jobs of one gravac-controller. Each job (core/job_id.h: name + run id) has its
// own Coordinator and so its own GraVAC policy, membership, statistics and decisions; no call on
// one job reaches another's state, so jobs never see each other's decisions.
//
// Life of a job:
//   - created by the first Join naming it (ForJoin), with the registry's CoordinatorOptions and
//     the node count the joiner gives (0 = the options' nodes);
//   - "assembling" until every node joined, then "running";
//   - "ended" once every node of the assembled job left (Leave, sent by a daemon whose workers shut
//     down), or when it stayed without any decision stream or joiner for `retention` (its daemons
//     vanished: "abandoned"). Its Coordinator is shut down then;
//   - "failed" when one of its daemons reported that its part failed (Fail: a refused or crashed
//     session); its pending joins and decision streams end at once with Aborted naming the job,
//     the node and the reason, so the other nodes need not wait for the join timeout. A job not
//     yet known (no node had joined: e.g. a daemon refused its first worker) is remembered as
//     failed too, and listed as failed with no nodes until it is forgotten. Failed counts as
//     ended below;
//   - forgotten `retention` after its end (Tick). Its run id stays remembered as ended (up to
//     `max_ended_ids` of them, the oldest go first), so a daemon naming it again is refused:
//     a rerun of a name needs a new run id.
// A job's metrics come from `observers` (ControllerMetrics::ForJob: series labelled by the job),
// made with the job and destroyed after its Coordinator when the job is forgotten.
//
// Thread-safety: every method is thread-safe. The registry's mutex is never held while a
// Coordinator is called, so Coordinator callbacks may run while the registry is used elsewhere.
// Coordinators are handed out as shared_ptr: a gRPC call that holds one keeps the job's
// Coordinator (and its observer) alive after the registry forgot it.
#ifndef GRAVAC_CONTROLLER_JOB_REGISTRY_H_
#define GRAVAC_CONTROLLER_JOB_REGISTRY_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
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
#include "controller/coordinator_observer.h"
#include "core/job_id.h"

namespace gravac::controller {

// Makes the observer of one job (nullptr = none).
using ObserverFactory = std::function<std::unique_ptr<CoordinatorObserver>(const JobId&)>;

struct JobRegistryOptions {
  // Every job's coordinator settings; `nodes` is the default node count of a job whose joiners
  // give none, `observer` is ignored (see `observers`).
  CoordinatorOptions coordinator;
  absl::Duration retention = absl::Minutes(10);
  size_t max_ended_ids = 65536;
  ObserverFactory observers;  // empty = no metrics
};

enum class JobState { kAssembling, kRunning, kEnded, kFailed };
// "assembling", "running", "ended", "failed".
const char* JobStateName(JobState state);

struct JobSummaryInfo {
  JobId id;
  JobState state = JobState::kAssembling;
  JobStatusInfo status;
  absl::Time started;
  std::optional<absl::Time> ended;
  std::string failure;  // kFailed: why (names the job, the node and the reason)
};

class JobRegistry {
 public:
  // InvalidArgument when the coordinator options are bad (checked by making a Coordinator).
  static absl::StatusOr<std::unique_ptr<JobRegistry>> Create(JobRegistryOptions options);
  ~JobRegistry();  // Shutdown()

  // The Coordinator a Join of `id` goes to, created when the job is new. `nodes` (0 = the
  // default) must match the job's once it exists. AlreadyExists for a run id that ended (a
  // refusal: the worker's C API reports GRAVAC_ERR_REFUSED),
  // InvalidArgument for a malformed id or a node count that disagrees, Unavailable after
  // Shutdown. Every message names the job.
  absl::StatusOr<std::shared_ptr<Coordinator>> ForJoin(const JobId& id, int nodes);

  // The Coordinator of a job that exists and has not ended; FailedPrecondition naming the job
  // otherwise (a daemon answers it by joining again, which fails if the job ended).
  absl::StatusOr<std::shared_ptr<Coordinator>> Find(const JobId& id) const;

  // Node `node_rank` of the job left. Returns true when that was the job's last node (the job
  // ended). FailedPrecondition for an unknown job, InvalidArgument for a node the job lacks.
  absl::StatusOr<bool> Leave(const JobId& id, int node_rank);

  // Node `node_name` (rank `node_rank`, -1 = unknown) of the job failed with `reason`: the job
  // fails (see above) unless it already ended or failed. Returns true when it failed now.
  // InvalidArgument for a malformed id.
  absl::StatusOr<bool> Fail(const JobId& id, const std::string& node_name, int node_rank,
                            const std::string& reason);

  // Drives every job's join timeouts and delayed deliveries, ends abandoned jobs and forgets the
  // ones ended more than `retention` ago.
  void Tick(absl::Time now);

  // Every job the registry holds, by start time.
  std::vector<JobSummaryInfo> List() const;

  // The job named `name`: the run `run_id`, or the newest run when it is empty. An empty name is
  // the only job when there is exactly one, else the job "default". NotFound naming it otherwise.
  absl::StatusOr<JobSummaryInfo> Status(const std::string& name, const std::string& run_id) const;

  // Shuts every Coordinator down; later joins fail with Unavailable. Idempotent.
  void Shutdown();

 private:
  struct Handle;  // a job's observer + Coordinator, in destruction order
  struct Job {
    std::shared_ptr<Handle> handle;
    std::shared_ptr<Coordinator> coordinator;  // aliases handle
    int nodes = 0;
    std::set<int> left;
    absl::Time started;
    std::optional<absl::Time> ended;
    std::optional<absl::Time> idle_since;  // no stream, no joiner
    bool abandoned = false;
    std::string failure;  // set when it failed
  };

  explicit JobRegistry(JobRegistryOptions options) : options_(std::move(options)) {}
  JobSummaryInfo Summarize(const JobId& id, const Job& job) const;
  void RememberEnded(const JobId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobRegistryOptions options_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<JobId, Job> jobs_ ABSL_GUARDED_BY(mu_);
  // Run ids of forgotten jobs, refused like those of ended jobs still held.
  std::set<JobId> ended_ids_ ABSL_GUARDED_BY(mu_);
  // Why those of them that failed failed (evicted with ended_ids_).
  std::map<JobId, std::string> failures_ ABSL_GUARDED_BY(mu_);
  // Jobs that failed before any node joined (no Job, no Coordinator): when, for List until
  // `retention` after it.
  std::map<JobId, absl::Time> unjoined_failures_ ABSL_GUARDED_BY(mu_);
  std::deque<JobId> ended_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::controller

#endif  // GRAVAC_CONTROLLER_JOB_REGISTRY_H_

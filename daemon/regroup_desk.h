// RegroupDesk: a --serve_jobs daemon's side of an elastic job's membership change (issue 22).
//
// After their job's membership broke or changed, this node's workers each connect once with a
// regroup hello (Hello.regroup, naming the job's first run and the membership version they were
// in). The desk gathers them per (job, version): once all `local_size` arrived, or
// kLocalGather after the first when some did not (a worker of this node was lost: the present
// ones get dense local ranks in their old order), it asks the controller for the next membership
// (ControllerClient::Regroup, on a thread of its own) with this node's worker count, and answers
// each worker a Placement (its run, rank, size, local rank and size, node rank and nodes) or the
// controller's error (below --min-np, a stale version), then closes the connection. The workers
// then connect again with a normal hello naming the new run, which starts that run's JobSession:
// a new data plane and a new controller join, so nothing of the broken membership's data plane is
// reused.
//
// Thread-safety: Take and Tick are called from JobService's accept loop only; the destructor
// cancels regroups in progress and joins their threads.
#ifndef GRAVAC_DAEMON_REGROUP_DESK_H_
#define GRAVAC_DAEMON_REGROUP_DESK_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/ipc/unique_fd.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "daemon/gravacd_options.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon {

class ControllerClient;

class RegroupDesk {
 public:
  // `options` are the node's (controller, security, node_name, join_timeout); `log` must outlive.
  RegroupDesk(GravacdOptions options, Logger* log) : options_(std::move(options)), log_(log) {}
  ~RegroupDesk();
  RegroupDesk(const RegroupDesk&) = delete;
  RegroupDesk& operator=(const RegroupDesk&) = delete;

  static constexpr absl::Duration kLocalGather = absl::Seconds(2);

  // Takes a worker connection whose hello asked to regroup. Non-blocking.
  void Take(ipc::UniqueFd fd, const v1::Hello& hello);
  // Starts the groups whose gathering time is over; forgets finished ones.
  void Tick(absl::Time now);

 private:
  struct Worker {
    ipc::UniqueFd fd;
    int local_rank = 0;
    int64_t pid = 0;
  };
  struct Group {
    JobId job;
    int64_t from_version = 0;
    int local_size = 0;
    int min_size = 0;
    int max_size = 0;
    std::vector<std::string> expect_nodes;  // the first worker's (Hello.expect_nodes)
    std::vector<Worker> workers;
    absl::Time gather_until;
    bool started = false;
    std::atomic<bool> done{false};
    std::thread thread;
    std::shared_ptr<ControllerClient> client;  // set while the regroup runs (for cancelling)
  };

  void Start(Group& group);
  void Answer(Group& group);
  static void Send(int fd, const v1::DaemonMessage& msg);

  const GravacdOptions options_;
  Logger* const log_;
  std::map<std::pair<JobId, int64_t>, std::unique_ptr<Group>> groups_;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_REGROUP_DESK_H_

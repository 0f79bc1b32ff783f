// WorkerServer: the daemon's local side. It accepts the node's workers (client library
// gravac/gravac.h) on a Unix socket, maps their shared-memory staging segments, waits until every
// local worker posted the same tensor, checks that their specs agree, combines them into one
// NodeTensor (allreduce: the sum; allgather: the blocks concatenated in local-rank order;
// broadcast: the root's data) and hands it to a sink (Engine::Enqueue). When the sink's
// DoneCallback runs, the result is written back into every local worker's staging buffer (an
// allgather's result goes into a new memfd passed to the workers) and the requests complete.
//
// Protocol (core/ipc/, proto/gravac/v1/worker.proto): framed WorkerMessage / DaemonMessage over
// a stream socket, file descriptors passed with SCM_RIGHTS. A worker says Hello {rank, size,
// local_rank, local_size, pid} and gets Welcome or Error; it registers staging segments
// (memfd + POD header core/ipc/shm_abi.h) and posts Requests that point into them; one staging
// copy in and one copy out per tensor on the worker side, one reduction pass here.
//
// Socket: created with mode 0600, or 0660 and the given group. A second daemon on the same path
// is refused (Start fails with AlreadyExists) while the first one answers; a stale socket file
// (nobody listening) is replaced. Without a socket path the server listens nowhere and serves
// only the connections handed to it (Adopt: gravacd --serve_jobs reads each worker's hello on
// the node's socket and hands the connection to its job's server).
//
// Job: a hello naming a job (Hello.job_name/run_id) other than options.job is refused
// (PermissionDenied naming both jobs and the node); a hello naming none is this server's job.
//
// Failures: a worker whose connection closes without Shutdown fails the node: `on_failure` gets
// Unavailable naming its global rank, and every pending and later request of the other workers
// fails with that message. Locally inconsistent requests (different dtype, shape, op, kind, root,
// compress or step for the same name) fail on every local worker with FailedPrecondition naming
// the ranks and the field. A tensor posted by some local workers but not all for longer than
// `stall_warning` is logged (warning) naming the missing global ranks, once per stall_warning;
// after `stall_timeout` it fails the node (DeadlineExceeded naming the tensor and the missing
// ranks). A tensor that waits for a local worker which has already called gravac_shutdown can
// never complete: it fails the node at once (FailedPrecondition, GRAVAC_ERR_MISMATCH on the
// workers), so an extra or a missing collective at the end of a job is an error, not a hang.
// Device buffers (options.device): a worker's MapDevice is answered mapped, or `stage` with
// the reason when the handle cannot be opened (said once per worker in the log); a device
// request whose buffer cannot be mapped or read (a freed or foreign handle), is declared as
// host memory, or lies on another CUDA device than the worker's earlier tensors fails on every
// rank of the job naming the rank, tensor and field, like a local disagreement. With
// options.device_reduce, an fp32 allreduce whose posts are all buffers of one CUDA device is
// summed there and handed to the engine in device memory (NodeTensor::device_data); otherwise
// the buffers are read into host memory and reduced there. Results are written back from host
// memory either way.
// With check_finite, a float allreduce whose local sum is not finite fails on every node.
// Liveness: the loop sends every welcomed worker a Heartbeat every stall_timeout / 6 (at most
// 1 s), and the Welcome carries stall_timeout as the bound after which a worker that heard
// nothing fails its requests (client/src/client.h): a stopped or hung daemon is an error on its
// own node's workers too.
//
// Threads: one internal thread (epoll) serves all workers and runs the sink; DoneCallbacks may
// run on any thread (they only queue work for the internal thread). All public methods are
// thread-safe. WaitForWorkers and WaitForShutdown block (bounded by their timeout).
#ifndef GRAVAC_DAEMON_LOCAL_WORKER_SERVER_H_
#define GRAVAC_DAEMON_LOCAL_WORKER_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ipc/device_access.h"
#include "daemon/local/device_reduce.h"
#include "core/ipc/framing.h"
#include "core/ipc/unique_fd.h"
#include "core/job_id.h"
#include "core/logging.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine/types.h"

namespace gravac::daemon {

struct WorkerServerOptions {
  std::string socket_path;   // created with mode 0600 (0660 + chgrp when group set); "" = none
  std::string socket_group;  // "" = none
  JobId job;                 // the job served (normalized); name "" = any hello is accepted
  std::string node_name;     // for refusals
  int local_size = 1;        // workers expected on this node
  absl::Duration stall_warning = absl::Seconds(60);
  // A tensor posted by some local workers and not by others for this long fails the node (every
  // pending and later tensor, on every node through the engine) naming it and the missing ranks.
  absl::Duration stall_timeout = absl::Seconds(600);
  // Allreduces of float tensors whose local sum holds a NaN or an infinity fail on every node
  // (InvalidArgument naming the tensor and the ranks whose input was not finite).
  bool check_finite = false;
  Logger* log = nullptr;  // nullptr: nothing is logged
  // Connected workers, handoff latencies (in, out), local reduce time, local stalls and tensors
  // failed here; nullptr = no metrics. Must outlive the server.
  DaemonMetrics* metrics = nullptr;
  // CUDA tensors handed over by IPC (worker.proto MapDevice, Request.device_buffer): opened
  // once per allocation through this, read into the local reduce after the worker's ready
  // event, the result written back before its done event. nullptr or !Available(): the Welcome
  // says no device intake and the workers stage CUDA tensors through host memory. Must outlive
  // the server.
  ipc::DeviceAccess* device = nullptr;
  // Said in the Welcome (nccl_built): gravacd was built with NCCL device collectives.
  bool nccl_built = false;
  // With `device`: an fp32 allreduce whose local workers all hand buffers of one CUDA device is
  // summed there (after their ready events) and handed to the engine in device memory
  // (NodeTensor::device_data). nullptr, check_finite, or a device it cannot use: the buffers are
  // read into host memory and reduced there. Must outlive the server.
  DeviceReduce* device_reduce = nullptr;
};

// The node's ranks, learnt from the workers' hellos: global ranks
// [first_rank, first_rank + local_size) of world_size.
struct LocalGroup {
  int first_rank = 0;
  int local_size = 0;
  int world_size = 0;
};

// Receives every locally complete tensor (Engine::Enqueue); called on the server's thread.
using NodeTensorSink = std::function<void(NodeTensor, DoneCallback)>;
// Receives a local failure (Engine::FailLocal); called on the server's thread.
using FailureSink = std::function<void(absl::Status)>;
// Starts the timeline in a file (Engine::StartTimeline), or stops it for "".
using TimelineControl = std::function<absl::Status(const std::string& path)>;

namespace internal {
class WorkerServerImpl;
}  // namespace internal

class WorkerServer {
 public:
  // Binds and listens on options.socket_path and starts the server thread. Fails with
  // AlreadyExists when another live daemon listens on the path, InvalidArgument on bad options
  // (local_size < 1, unknown group, path too long).
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(WorkerServerOptions options);

  // Hands over a worker connection whose first frame (`hello`, a serialized WorkerMessage) was
  // already read from it by `reader`; the server answers the hello as if it had read it.
  // Non-blocking; the connection is closed without an answer when the server is stopping.
  void Adopt(ipc::UniqueFd fd, ipc::FrameReader reader, std::string hello);

  // Fails the node with `status` (as a worker's failure does): every pending and later request
  // of the local workers fails with it. Non-blocking.
  void Fail(absl::Status status);

  // Blocks until local_size workers said hello with consistent ranks (or timeout:
  // DeadlineExceeded naming the local ranks still missing). Returns the same group when called
  // again.
  absl::StatusOr<LocalGroup> WaitForWorkers(absl::Duration timeout);

  // From now on locally complete tensors go to `sink`; requests received earlier are queued
  // and delivered now. A worker that disconnects without shutdown calls `on_failure` with a
  // status naming its global rank. A worker's timeline request (TIMELINE) goes to `timeline`
  // (answered Unimplemented when null). Call once.
  void Serve(NodeTensorSink sink, FailureSink on_failure, TimelineControl timeline = nullptr);

  // Blocks until every local worker has called gravac_shutdown (or disconnected) or timeout.
  // Returns OK when all shut down cleanly, the failure (Unavailable naming the rank) when one
  // disconnected without shutdown, DeadlineExceeded naming the ranks still running.
  absl::Status WaitForShutdown(absl::Duration timeout);

  // Closes the socket, unlinks it, fails pending requests (Cancelled) and joins the thread.
  // Idempotent; the destructor calls it. DoneCallbacks that run later are ignored.
  void Stop();

  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

 private:
  explicit WorkerServer(std::shared_ptr<internal::WorkerServerImpl> impl);
  std::shared_ptr<internal::WorkerServerImpl> impl_;
};

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_LOCAL_WORKER_SERVER_H_

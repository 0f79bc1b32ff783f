// Internal state of WorkerServer (worker_server.h); not part of the daemon's interface.
//
// Thread-safety: everything not guarded by mu_ belongs to the server thread (Loop). Other
// threads only touch mu_-guarded fields and queue work with Post().
#ifndef GRAVAC_DAEMON_LOCAL_WORKER_SERVER_IMPL_H_
#define GRAVAC_DAEMON_LOCAL_WORKER_SERVER_IMPL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/ipc/device_intake.h"
#include "core/ipc/framing.h"
#include "core/ipc/peer_credentials.h"
#include "core/ipc/segment.h"
#include "core/ipc/unix_socket.h"
#include "core/mutex.h"
#include "daemon/local/local_reduce.h"
#include "daemon/local/worker_server.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::daemon::internal {

class WorkerServerImpl : public std::enable_shared_from_this<WorkerServerImpl> {
 public:
  static absl::StatusOr<std::shared_ptr<WorkerServerImpl>> Create(WorkerServerOptions options);
  ~WorkerServerImpl();

  absl::StatusOr<LocalGroup> WaitForWorkers(absl::Duration timeout);
  void Serve(NodeTensorSink sink, FailureSink on_failure, TimelineControl timeline);
  absl::Status WaitForShutdown(absl::Duration timeout);
  void Stop();
  void Adopt(ipc::UniqueFd fd, ipc::FrameReader reader, std::string hello);
  void Fail(absl::Status status);

 private:
  struct Conn {
    ipc::UniqueFd fd;
    ipc::FrameReader reader;
    int local_rank = -1;  // -1 until a valid hello
    int rank = -1;
    int64_t pid = 0;
    bool shutdown = false;
    std::map<uint64_t, ipc::ShmSegment> segments;
    std::set<std::string> in_flight;  // tensor names posted and not answered
    int device = -1;                  // CUDA device of its device tensors (-1: none yet)
  };
  // One local worker's post of a tensor.
  struct PostedRequest {
    uint64_t request_id = 0;
    TensorSpec spec;
    uint64_t segment_id = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    // A device buffer handed over by IPC (else the data is in the segment): mapped here, on
    // `device`; `host` holds it for the local reduce. A post whose buffer cannot be taken
    // carries the error instead (the tensor then fails on every rank).
    bool on_device = false;
    void* mapped = nullptr;
    std::shared_ptr<const void> pin;  // keeps `mapped` open until the post is dropped
    int device = -1;
    std::string ready_event, done_event;
    std::vector<uint8_t> host;
    absl::Status device_status;
  };
  struct Pending {
    std::vector<std::optional<PostedRequest>> posts;  // by local rank
    int count = 0;
    bool join = false;  // the join (kJoin): every local rank posts it
    // By local rank: in the tensor's process set (as its first post gave it; a rank outside it
    // that posts it anyway becomes one, and the set's disagreement fails the tensor).
    std::vector<bool> member;
    int64_t first_posted_ns = 0;
    absl::Time last_warned = absl::InfinitePast();
  };
  // A locally complete tensor waiting for Serve, or handed to the sink.
  struct Ready {
    std::string name;
    std::vector<std::optional<PostedRequest>> posts;  // by local rank; none: joined
    NodeTensor tensor;
  };

  explicit WorkerServerImpl(WorkerServerOptions options);
  void Watch(int fd);
  void Post(std::function<void()> task);
  absl::Status LockedFailure() ABSL_LOCKS_EXCLUDED(mu_);  // takes mu_ to read failure_

  // Server thread.
  void Loop();
  void RunTasks();
  void AcceptAll();
  void ReadFrom(Conn& conn);
  bool Handle(Conn& conn, v1::WorkerMessage& msg, std::vector<ipc::UniqueFd> fds);
  bool HandleHello(Conn& conn, const v1::Hello& hello);
  // OK when the hello names this server's job (or none), else PermissionDenied naming both.
  absl::Status CheckJob(const v1::Hello& hello) const;
  void HandleRequest(Conn& conn, const v1::Request& request);
  // worker_server_device.cc: a MapDevice, answered mapped / stage / error.
  void HandleMapDevice(Conn& conn, const v1::MapDevice& map);
  // The device part of a post (post->on_device): mapped, or the error kept in device_status.
  void TakeDevicePost(Conn& conn, const v1::Request& request, PostedRequest* post);
  // Reads the device posts of a locally complete tensor into their host buffers; the first
  // error (naming rank, tensor and field) when one cannot be read.
  absl::Status ReadDevicePosts(const std::string& name, Pending& pending);
  // The node's sum of a locally complete tensor in device memory (options.device_reduce), when
  // every post is an fp32 allreduce buffer of one CUDA device of the same size; nullptr when
  // not (the caller reads the posts into host memory). An error (naming rank or device, tensor
  // and field) when a post cannot be taken, its ready event not waited for, or the sum fails.
  absl::StatusOr<std::shared_ptr<const DeviceData>> ReduceDevicePosts(const std::string& name,
                                                                     const Pending& pending);
  // Writes a result into a device post's buffer and records its done event: device to device
  // (DeviceAccess::WriteFromDevice) when the result is in device memory of the post's device
  // (TensorResult::device_data), else from host memory (the result's host bytes, copied there
  // once by ResultHostData when they are on a device). The error names rank, tensor and field.
  absl::Status WriteDevicePost(const Conn& conn, const std::string& name, const PostedRequest& post,
                               TensorResult& result);
  // A TIMELINE request: applied now when serving, else when Serve starts.
  void HandleTimeline(Conn& conn, const v1::Request& request);
  void AnswerTimeline(int local_rank, uint64_t request_id, const std::string& path);
  // Every local rank posted the tensor, or has joined and contributes zeros.
  bool LocallyComplete(const Pending& p) const;
  // Completes the pending tensors that a join just made complete.
  void CompleteAfterJoin();
  // "" when the joined local ranks can contribute zeros to `spec`, else the error naming them.
  std::string JoinedAnswer(const TensorSpec& spec) const;
  void Complete(const std::string& name, Pending pending);
  void Deliver(Ready ready);
  // Deliver when serving, else queued_ until Serve.
  void DeliverOrQueue(Ready ready);
  void OnDone(uint64_t ticket, TensorResult result, int64_t done_ns);
  void Respond(int local_rank, uint64_t request_id, const std::string& name,
               const absl::Status& status);
  // A Response carrying only `status` (Respond's, and a TIMELINE request's answer).
  void SendStatus(Conn& conn, uint64_t request_id, const absl::Status& status);
  void Send(Conn& conn, const v1::DaemonMessage& msg, absl::Span<const int> fds = {});
  void Drop(Conn& conn, const absl::Status& why);
  // Tells the worker why (an Error message) and drops it.
  void Refuse(Conn& conn, const absl::Status& why);
  void FailNode(absl::Status status);
  // FailNode's work after failure_ was set: fails the pending and queued tensors, reports.
  void FailPending(absl::Status status);
  void ReportFailure();
  void MarkFinished(int local_rank);
  void CheckStalls();
  // Sends a Heartbeat to every welcomed worker when heartbeat_interval() passed since the last.
  void SendHeartbeats();
  absl::Duration heartbeat_interval() const;
  // The pending tensors other than `except` and the ranks each lacks, for a stall error.
  std::string OtherStalls(const std::string& except) const;
  void Teardown();
  void CountWorkers();  // connected workers to the metrics
  Conn* ByLocalRank(int local_rank);

  const WorkerServerOptions options_;
  ipc::UniqueFd listen_fd_, epoll_fd_, wake_fd_;
  ino_t socket_inode_ = 0;
  ipc::PeerPolicy peer_policy_;  // who may connect (SO_PEERCRED)
  std::thread thread_;
  Mutex join_mu_;  // serialises the join of thread_ in Stop

  Mutex mu_;    // core/mutex.h says why not absl::Mutex
  CondVar cv_;  // group_ready_, finished_, failure_, stopping_ changed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool group_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool group_known_ ABSL_GUARDED_BY(mu_) = false;
  LocalGroup group_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> hello_seen_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_slot_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);

  // Server thread only.
  std::map<int, std::unique_ptr<Conn>> conns_;  // by fd
  std::vector<Conn*> slots_;                    // by local rank (nullptr: none or gone)
  absl::Time last_heartbeat_ = absl::InfinitePast();
  std::map<std::string, Pending> pending_;
  std::deque<Ready> queued_;             // complete before Serve
  std::map<uint64_t, Ready> in_flight_;  // handed to the sink, by ticket
  uint64_t next_ticket_ = 1;
  // Horovod's join. joined_: the local rank posted join and waits for the job's (by local rank);
  // last_joined_: the local rank that joined last; posted_names_: the allreduce names each local
  // rank ever posted (a joined rank contributes zeros only to those; grows with the distinct
  // names a job uses).
  std::vector<bool> joined_;
  int last_joined_ = -1;
  std::vector<std::unordered_set<std::string>> posted_names_;
  std::unique_ptr<ipc::DeviceIntake> intake_;  // set when options_.device is available
  BufferPool pool_;  // result buffers reused as the next tensors' node buffers
  bool serving_ = false;
  bool failure_reported_ = false;
  NodeTensorSink sink_;
  TimelineControl timeline_;
  struct QueuedTimeline {
    int local_rank = 0;
    uint64_t request_id = 0;
    std::string path;
  };
  std::vector<QueuedTimeline> queued_timelines_;  // received before Serve
  FailureSink on_failure_;
  int first_rank_ = 0;
  bool said_no_device_reduce_ = false;  // the fallback of ReduceDevicePosts was logged
  int world_size_ = 0;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_LOCAL_WORKER_SERVER_IMPL_H_

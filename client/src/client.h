// Client: the worker side of the worker <-> daemon link behind the C API (gravac.h). It holds
// the connection (framed worker.proto messages on a Unix socket), the staging arena, the table
// of requests in flight and a reader thread that completes them: on a Response the result is
// copied from the staging block into the caller's buffer (allreduce / broadcast) or the
// allgather's result segment is kept for gravac_allgather_result, then the request is marked
// done.
//
// Liveness: the daemon sends heartbeats (worker.proto); when it stays silent longer than the
// bound its Welcome gave (gravacd's --stall_timeout_s), the reader fails every pending and later
// request with DeadlineExceeded naming the daemon, so a stopped or hung gravacd is an error on
// its own node's workers too, not a hang.
//
// Thread-safety: Submit / Barrier may be called from several threads at once; Shutdown last.
// RequestState is shared between the caller and the reader thread under its own mutex.
#ifndef GRAVAC_CLIENT_SRC_CLIENT_H_
#define GRAVAC_CLIENT_SRC_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/src/shared_buffers.h"
#include "client/src/staging.h"
#include "core/ipc/framing.h"
#include "core/ipc/segment.h"
#include "core/ipc/unique_fd.h"
#include "core/mutex.h"
#include "core/settings.h"
#include "gravac/v1/worker.pb.h"

namespace gravac::client {

struct ClientConfig {
  int rank = -1;
  int size = 0;
  int local_rank = -1;
  int local_size = 0;
  std::string daemon_socket;
  absl::Duration connect_timeout = absl::Seconds(30);
  uint64_t staging_bytes = 16 << 20;
  bool zero_copy = true;  // requests use shared buffers in place (GRAVAC_ZERO_COPY)
  // The job (GRAVAC_JOB_NAME, GRAVAC_RUN_ID) and node (GRAVAC_NODE_RANK of GRAVAC_NODES) the
  // hello names; "" / nodes 0 = unknown (the daemon's own job; its placement is derived).
  std::string job_name;
  std::string run_id;
  int node_rank = -1;
  int nodes = 0;
};

// Reads GRAVAC_RANK, GRAVAC_SIZE, GRAVAC_LOCAL_RANK, GRAVAC_LOCAL_SIZE, GRAVAC_DAEMON_SOCKET,
// GRAVAC_CONNECT_TIMEOUT_S, GRAVAC_STAGING_BYTES, GRAVAC_ZERO_COPY, GRAVAC_JOB_NAME,
// GRAVAC_RUN_ID, GRAVAC_NODE_RANK, GRAVAC_NODES through the settings table.
absl::StatusOr<ClientConfig> ConfigFromEnvironment(const EnvLookup& env);

struct RequestState {
  // Blocks until done; the status.
  absl::Status Wait() ABSL_LOCKS_EXCLUDED(mu);

  Mutex mu;
  CondVar cv;  // done changed
  bool done ABSL_GUARDED_BY(mu) = false;
  bool abandoned ABSL_GUARDED_BY(mu) = false;  // the caller freed it: never touch `out` again
  absl::Status status ABSL_GUARDED_BY(mu);
  std::string error_text ABSL_GUARDED_BY(mu);  // gravac_request_error's copy of status.message()
  double theta ABSL_GUARDED_BY(mu) = 1.0;
  std::string collective ABSL_GUARDED_BY(mu);
  int64_t decision_epoch ABSL_GUARDED_BY(mu) = 0;
  // allgather results.
  std::vector<int64_t> first_dims ABSL_GUARDED_BY(mu);
  std::optional<ipc::ShmSegment> gathered ABSL_GUARDED_BY(mu);
  uint64_t result_bytes ABSL_GUARDED_BY(mu) = 0;
  // Set at submit, before the state is shared.
  v1::CollectiveKind kind = v1::ALLREDUCE;
  void* out = nullptr;
  StagingBlock block;
  bool borrowed = false;   // `block` lies in a shared buffer (SharedBuffers::Borrow): no copies
  bool device = false;     // a device buffer handed over by IPC, or a MapDevice: no block
  bool stage ABSL_GUARDED_BY(mu) = false;  // MapDevice's answer: stage this allocation
  uint64_t row_bytes = 0;  // allgather: bytes per unit of the first dimension
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientConfig& config);
  ~Client();

  const ClientConfig& config() const { return config_; }

  // Copies `bytes` of `in` into staging and posts `request` (id, segment, offset and bytes are
  // filled in here). `out` receives the result (allreduce / broadcast), may equal `in`. When `in`
  // lies in a shared buffer and the result goes back in place (out == in, or an allgather), the
  // request uses that memory directly (unless zero_copy is off).
  absl::StatusOr<std::shared_ptr<RequestState>> Submit(v1::Request request, const void* in,
                                                       void* out, uint64_t bytes,
                                                       uint64_t row_bytes);
  // Posts `request`, whose data is a device buffer handed over by IPC (request.device_buffer):
  // no staging copy; the result is written into that buffer by gravacd (id filled in here).
  absl::StatusOr<std::shared_ptr<RequestState>> SubmitDevice(v1::Request request);
  // Whether gravacd said in its Welcome that it maps CUDA IPC handles.
  bool device_intake() const { return device_intake_; }
  // Whether gravacd said in its Welcome that it was built with NCCL device collectives.
  bool nccl_built() const { return nccl_built_; }
  // Asks gravacd to map a device allocation (worker.proto MapDevice). Blocks for the answer:
  // true when mapped, false when gravacd cannot (`reason` says why: stage its tensors); an
  // error for a malformed buffer or a dead connection.
  absl::StatusOr<bool> MapDevice(const v1::DeviceBuffer& buffer, std::string* reason);
  absl::Status Barrier();
  // Horovod's join: blocks until every rank has joined; meanwhile this rank contributes zeros to
  // the allreduces the others post. Returns the global rank that joined last.
  absl::StatusOr<int> Join();
  // Horovod's start_timeline / stop_timeline on this worker's daemon ("" stops). Blocks for
  // the daemon's answer.
  absl::Status Timeline(const std::string& path);
  absl::Status Shutdown();

  int staging_segments();
  // Memory the daemon maps, for tensors (gravac_buffer_alloc). Outlives the client.
  const std::shared_ptr<SharedBuffers>& shared_buffers() const { return shared_; }

 private:
  explicit Client(ClientConfig config);
  absl::Status Hello();
  // Sends one frame (takes send_mu_).
  absl::Status SendLocked(const v1::WorkerMessage& msg, absl::Span<const int> fds = {})
      ABSL_LOCKS_EXCLUDED(send_mu_);
  absl::Status RegisterSegment(uint64_t id, const ipc::ShmSegment& segment);
  void ReleaseSegment(uint64_t id);
  // Returns a finished request's block to the staging arena or its shared buffer.
  void FreeBlockLocked(const RequestState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReaderLoop();
  void OnResponse(v1::Response& response, std::vector<ipc::UniqueFd> fds);
  void FailAll(const absl::Status& status);

  const ClientConfig config_;
  ipc::UniqueFd sock_;
  Mutex mu_;  // core/mutex.h says why not absl::Mutex
  // One frame at a time; taken after mu_ when both are needed (the arena registers a segment).
  Mutex send_mu_ ABSL_ACQUIRED_AFTER(mu_);
  CondVar cv_;  // dead_, shutdown_acked_ changed
  std::map<uint64_t, std::shared_ptr<RequestState>> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<StagingArena> arena_ ABSL_PT_GUARDED_BY(mu_);  // set in Connect
  std::shared_ptr<SharedBuffers> shared_;  // thread-safe itself; set in Connect
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t barrier_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status dead_ ABSL_GUARDED_BY(mu_);  // set when the connection is gone
  bool shutdown_acked_ ABSL_GUARDED_BY(mu_) = false;
  // From the Welcome: how long the daemon may stay silent before it counts as hung (0: no
  // bound, an older daemon without heartbeats), its pid and heartbeat interval for the message.
  absl::Duration liveness_timeout_ = absl::ZeroDuration();
  absl::Duration heartbeat_interval_ = absl::ZeroDuration();
  int64_t daemon_pid_ = 0;
  bool device_intake_ = false;  // from the Welcome
  bool nccl_built_ = false;     // from the Welcome
  ipc::FrameReader reader_;
  std::thread reader_thread_;
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_CLIENT_H_

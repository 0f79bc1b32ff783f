// NcclDeviceCollectives: DeviceCollectives (device_collectives.h) over device memory of one CUDA
// device per rank, through one NCCL communicator of all the ranks, every operation enqueued on one
// CUDA stream (gravacd's own: the engine's when it passes one, else a non-blocking stream made
// here). Built only with CUDA and NCCL; the caller (device_collectives_backends.h) knows whether.
//
// Operations.
//  - AllreduceSum: ncclAllReduce(sum, fp32) in place. NCCL chooses the algorithm (ring, tree,
//    NVLS...): every element is summed in an order NCCL does not document, so results are exact
//    only where every order is (small integers), and otherwise close to a serial sum.
//  - AgreeSizes: each rank's size goes to the device, ncclAllGather of one uint64 per rank, back
//    to pinned host memory; then Wait(timeout).
//  - Allgatherv: one ncclBroadcast per rank with a non-zero size (root r sends its payload into
//    its block of every rank's recv), all in one ncclGroupStart/End, so the p broadcasts run as
//    one launch. NCCL's allgather needs equal sizes; the broadcasts carry unequal ones without
//    padding.
//
// Bootstrap (Create). Rank 0 makes the ncclUniqueId (ncclGetUniqueId) and sends it to every rank
// with Communicator::Broadcast over the job's host data plane (the Communicator the engine will
// own; it is used here only, before the engine starts). Every rank then starts
// ncclCommInitRankConfig with a non-blocking config and polls ncclCommGetAsyncError up to
// options.op_timeout: a rank that never joins makes the others fail with kDeadlineExceeded, not
// hang. NCCL refuses two ranks of one communicator on the same device (ncclInvalidUsage,
// "Duplicate GPU detected"): every rank needs its own device.
//
// Non-blocking communicator. NCCL calls on it may return ncclInProgress; each call is followed by
// polling ncclCommGetAsyncError until the call is enqueued (bounded by op_timeout). Wait records
// an event on the stream after the last operation and polls cudaEventQuery and
// ncclCommGetAsyncError, sleeping from 20 us doubling up to 1 ms between polls (no spinning core).
// At the bound, or on an asynchronous NCCL error (ncclRemoteError, ncclSystemError: a peer died
// or closed), the communicator is aborted (ncclCommAbort: its kernels stop, its peers see the
// failure) and the error returned: kDeadlineExceeded or kUnavailable naming this rank and the
// operation; NCCL does not tell which peer, and the message says so. Wait also waits for work
// the caller enqueued on the same stream before it.
//
// Thread-safety: as device_collectives.h; every call sets the rank's CUDA device on the calling
// thread.
#ifndef GRAVAC_DAEMON_COLLECTIVES_NCCL_DEVICE_COLLECTIVES_H_
#define GRAVAC_DAEMON_COLLECTIVES_NCCL_DEVICE_COLLECTIVES_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"

namespace gravac::collectives {

class NcclDeviceCollectives : public DeviceCollectives {
 public:
  // Bootstraps over `bootstrap` (the same ranks; only used during the call) and returns once the
  // communicator is ready. kInvalidArgument for a bad device, kFailedPrecondition without one,
  // kDeadlineExceeded when a rank did not join within op_timeout, NCCL's error otherwise; every
  // message names this rank and the device.
  static absl::StatusOr<std::unique_ptr<NcclDeviceCollectives>> Create(
      Communicator& bootstrap, const DeviceCollectivesOptions& options);

  ~NcclDeviceCollectives() override;
  NcclDeviceCollectives(const NcclDeviceCollectives&) = delete;
  NcclDeviceCollectives& operator=(const NcclDeviceCollectives&) = delete;

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  int device() const override { return options_.device; }
  void* stream() const override { return stream_; }

  absl::Status AllreduceSum(float* data, size_t count) override;
  absl::StatusOr<std::vector<size_t>> AgreeSizes(size_t bytes, absl::Duration timeout) override;
  absl::Status Allgatherv(const void* send, void* recv,
                          absl::Span<const size_t> bytes_per_rank) override;
  absl::Status Wait(absl::Duration timeout) override;
  absl::Status abort_status() const override { return abort_status_; }

 private:
  NcclDeviceCollectives(int rank, int size, const DeviceCollectivesOptions& options)
      : rank_(rank), size_(size), options_(options) {}

  absl::Status Init(Communicator& bootstrap);
  // Checks the abort state, sets the device and names the operation for messages.
  absl::Status Begin(std::string what);
  // Polls ncclCommGetAsyncError until the last call is enqueued (or the bound).
  absl::Status WaitEnqueued(ncclResult_t result, const char* call);
  // Polls `done` and the communicator's async error until done, an error or `deadline`.
  absl::Status PollUntil(absl::Time deadline, const char* waiting_for);
  // Aborts the communicator once; records and returns the first error (with this rank).
  absl::Status Fail(absl::Status status);

  const int rank_;
  const int size_;
  const DeviceCollectivesOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  cudaEvent_t done_ = nullptr;
  uint64_t* host_sizes_ = nullptr;    // pinned, size_ + 1 (the last: this rank's)
  uint64_t* device_sizes_ = nullptr;  // size_ + 1
  bool in_flight_ = false;            // an operation was enqueued since the last Wait
  std::string what_;                  // the operation running, for messages
  uint64_t ops_ = 0;
  absl::Status abort_status_;
};

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_NCCL_DEVICE_COLLECTIVES_H_

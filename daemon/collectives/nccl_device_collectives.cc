#include "daemon/collectives/nccl_device_collectives.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/cuda/cuda_status.h"
#include "core/status.h"
#include "daemon/transport/nccl/nccl_status.h"

namespace gravac::collectives {
namespace {

using transport::nccl::NcclResultToStatus;

constexpr absl::Duration kFirstSleep = absl::Microseconds(20);
constexpr absl::Duration kMaxSleep = absl::Milliseconds(1);

// Polls `ready` until it returns true or an error, or `deadline` (false). Sleeps between polls.
absl::StatusOr<bool> PollFor(absl::Time deadline,
                             const std::function<absl::StatusOr<bool>()>& ready) {
  absl::Duration sleep = kFirstSleep;
  while (true) {
    ASSIGN_OR_RETURN(bool done, ready());
    if (done) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(std::min(sleep, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    sleep = std::min(sleep * 2, kMaxSleep);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclDeviceCollectives>> NcclDeviceCollectives::Create(
    Communicator& bootstrap, const DeviceCollectivesOptions& options) {
  std::unique_ptr<NcclDeviceCollectives> dc(
      new NcclDeviceCollectives(bootstrap.rank(), bootstrap.size(), options));
  if (absl::Status s = dc->Init(bootstrap); !s.ok()) {
    if (!dc->abort_status_.ok()) {  // names the rank already
      return absl::Status(s.code(),
                          absl::StrFormat("%s (CUDA device %d)", s.message(), options.device));
    }
    return absl::Status(s.code(), absl::StrFormat("rank %d: nccl collectives on CUDA device %d: %s",
                                                  dc->rank_, options.device, s.message()));
  }
  return dc;
}

absl::Status NcclDeviceCollectives::Init(Communicator& bootstrap) {
  if (options_.device < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("bad device %d", options_.device));
  }
  int devices = 0;
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
  if (options_.device >= devices) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no CUDA device %d (%d devices)", options_.device, devices));
  }
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  // Rank 0 always takes part in the broadcast, even when it could not make an id, so that the
  // others fail with its reason rather than a timeout: an all-zero id means "failed".
  absl::Status made;
  if (rank_ == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    made = NcclResultToStatus(r, "ncclGetUniqueId(&id)", nullptr, __FILE__, __LINE__);
  }
  RETURN_IF_ERROR(bootstrap.Broadcast(id.internal, sizeof(id.internal), 0));
  RETURN_IF_ERROR(made);
  static const ncclUniqueId kZero{};
  if (std::memcmp(&id, &kZero, sizeof(id)) == 0) {
    return absl::UnavailableError("rank 0 could not make the NCCL unique id (see its log)");
  }
  if (options_.stream != nullptr) {
    stream_ = static_cast<cudaStream_t>(options_.stream);
  } else {
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    own_stream_ = true;
  }
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  const size_t slots = (static_cast<size_t>(size_) + 1) * sizeof(uint64_t);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&host_sizes_), slots));
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&device_sizes_), slots));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  what_ = absl::StrFormat("init of %d ranks", size_);
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  return WaitEnqueued(r, "ncclCommInitRankConfig");
}

NcclDeviceCollectives::~NcclDeviceCollectives() {
  (void)cudaSetDevice(options_.device);
  // Abort, not destroy: it never waits for peers, and stops kernels still running.
  if (comm_ != nullptr) (void)ncclCommAbort(comm_);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  if (done_ != nullptr) (void)cudaEventDestroy(done_);
  if (own_stream_) (void)cudaStreamDestroy(stream_);
  if (device_sizes_ != nullptr) (void)cudaFree(device_sizes_);
  if (host_sizes_ != nullptr) (void)cudaFreeHost(host_sizes_);
}

absl::Status NcclDeviceCollectives::Fail(absl::Status status) {
  if (!abort_status_.ok()) return abort_status_;
  abort_status_ = absl::Status(
      status.code(), absl::StrFormat("rank %d: nccl %s: %s", rank_, what_, status.message()));
  if (comm_ != nullptr) {
    (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  return abort_status_;
}

absl::Status NcclDeviceCollectives::Begin(std::string what) {
  if (!abort_status_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl collectives were aborted: ", abort_status_.message()));
  }
  what_ = absl::StrFormat("%s (operation %d)", what, ops_++);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  return absl::OkStatus();
}

absl::Status NcclDeviceCollectives::PollUntil(absl::Time deadline, const char* waiting_for) {
  const bool enqueue = std::strcmp(waiting_for, "enqueue") == 0;
  absl::StatusOr<bool> done = PollFor(deadline, [&]() -> absl::StatusOr<bool> {
    ncclResult_t async = ncclSuccess;
    GRAVAC_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async), comm_);
    if (async != ncclSuccess && async != ncclInProgress) {
      absl::Status s =
          NcclResultToStatus(async, "ncclCommGetAsyncError", comm_, __FILE__, __LINE__);
      if (absl::IsUnavailable(s)) {
        return absl::UnavailableError(
            absl::StrCat("a peer rank failed or closed (NCCL does not say which): ", s.message()));
      }
      return s;
    }
    if (async == ncclInProgress) return false;
    if (enqueue) return true;
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) return false;
    GRAVAC_CUDA_RETURN_IF_ERROR(q);
    return true;
  });
  if (!done.ok()) return Fail(done.status());
  if (!*done) {
    return Fail(absl::DeadlineExceededError(absl::StrFormat(
        "%s not complete within the bound (a peer rank did not take part, or is stuck; NCCL "
        "does not say which); the communicator is aborted",
        waiting_for)));
  }
  return absl::OkStatus();
}

absl::Status NcclDeviceCollectives::WaitEnqueued(ncclResult_t result, const char* call) {
  if (result != ncclSuccess && result != ncclInProgress) {
    return Fail(NcclResultToStatus(result, call, comm_, __FILE__, __LINE__));
  }
  return PollUntil(absl::Now() + options_.op_timeout, "enqueue");
}

absl::Status NcclDeviceCollectives::AllreduceSum(float* data, size_t count) {
  RETURN_IF_ERROR(Begin(absl::StrFormat("allreduce of %d floats", count)));
  if (count == 0) return absl::OkStatus();
  if (data == nullptr) return Fail(absl::InvalidArgumentError("null buffer"));
  in_flight_ = true;
  return WaitEnqueued(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_),
                      "ncclAllReduce");
}

absl::StatusOr<std::vector<size_t>> NcclDeviceCollectives::AgreeSizes(size_t bytes,
                                                                      absl::Duration timeout) {
  RETURN_IF_ERROR(Begin(absl::StrFormat("size agreement (%d bytes here)", bytes)));
  const auto enqueue = [&]() -> absl::Status {
    host_sizes_[size_] = bytes;
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device_sizes_ + size_, host_sizes_ + size_,
                                                sizeof(uint64_t), cudaMemcpyHostToDevice, stream_));
    in_flight_ = true;
    RETURN_IF_ERROR(WaitEnqueued(
        ncclAllGather(device_sizes_ + size_, device_sizes_, 1, ncclUint64, comm_, stream_),
        "ncclAllGather"));
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        host_sizes_, device_sizes_, size_ * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  };
  if (absl::Status s = enqueue(); !s.ok()) return Fail(s);
  RETURN_IF_ERROR(Wait(timeout));
  return std::vector<size_t>(host_sizes_, host_sizes_ + size_);
}

absl::Status NcclDeviceCollectives::Allgatherv(const void* send, void* recv,
                                               absl::Span<const size_t> bytes_per_rank) {
  size_t total = 0;
  for (size_t b : bytes_per_rank) total += b;
  RETURN_IF_ERROR(Begin(absl::StrFormat("allgatherv of %d bytes", total)));
  if (static_cast<int>(bytes_per_rank.size()) != size_) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("%d sizes for %d ranks", bytes_per_rank.size(), size_)));
  }
  if ((bytes_per_rank[rank_] > 0 && send == nullptr) || (total > 0 && recv == nullptr)) {
    return Fail(absl::InvalidArgumentError("null buffer"));
  }
  if (total == 0) return absl::OkStatus();
  auto* out = static_cast<uint8_t*>(recv);
  in_flight_ = true;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return Fail(NcclResultToStatus(r, "ncclGroupStart", comm_, __FILE__, __LINE__));
  size_t offset = 0;
  for (int root = 0; root < size_; ++root) {
    const size_t n = bytes_per_rank[root];
    if (n > 0) {
      // sendbuff is read on the root only; the others pass their block, never null.
      r = ncclBroadcast(root == rank_ ? send : out + offset, out + offset, n, ncclUint8, root,
                        comm_, stream_);
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    offset += n;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r != ncclSuccess && r != ncclInProgress) {
    return Fail(NcclResultToStatus(r, "ncclBroadcast", comm_, __FILE__, __LINE__));
  }
  return WaitEnqueued(end, "ncclGroupEnd");
}

absl::Status NcclDeviceCollectives::Wait(absl::Duration timeout) {
  if (!abort_status_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl collectives were aborted: ", abort_status_.message()));
  }
  if (!in_flight_) return absl::OkStatus();
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  if (cudaError_t e = cudaEventRecord(done_, stream_); e != cudaSuccess) {
    return Fail(cuda::CudaErrorToStatus(e, "cudaEventRecord(done_, stream_)", __FILE__, __LINE__));
  }
  RETURN_IF_ERROR(PollUntil(absl::Now() + timeout, "completion"));
  in_flight_ = false;
  return absl::OkStatus();
}

}  // namespace gravac::collectives

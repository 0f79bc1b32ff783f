// DeviceCollectives: the collectives between nodes that the engine's step needs, over buffers in
// one memory type: the dense step's in-place sum of a float buffer (AllreduceSum) and the sparse
// step's gather of every node's compressed message (AgreeSizes, then Allgatherv). Two
// implementations:
//  - nccl (nccl_device_collectives.h): device memory of one CUDA device, over an NCCL
//    communicator, enqueued on a CUDA stream (built with CUDA and NCCL only);
//  - host (host_device_collectives.h): host memory, over the job's Communicator (the host data
//    plane); what a job whose buffers are in host memory uses, and what the CPU tests run.
//
//   RETURN_IF_ERROR(dc.AllreduceSum(grad, n));                         // dense step
//   ASSIGN_OR_RETURN(std::vector<size_t> sizes, dc.AgreeSizes(mine.size(), timeout));
//   RETURN_IF_ERROR(dc.Allgatherv(mine.data(), all, sizes));          // sparse step
//   RETURN_IF_ERROR(dc.Wait(timeout));                                 // both complete
//
// Contract.
//  - Every rank calls the same operations in the same order with matching arguments (count;
//    bytes_per_rank as AgreeSizes returned it).
//  - AllreduceSum and Allgatherv start the operation and return without waiting for it (nccl: it
//    is enqueued on the stream; host: it has already run, see host_device_collectives.h). Wait
//    returns once every operation started so far is complete; the buffers may be reused (and the
//    results read) only then, or, for nccl, by work ordered after them on the stream. The
//    buffers are the caller's and live in memory_type() memory (nccl: of device()).
//  - AgreeSizes blocks (up to its timeout) until every rank's size is known: it is the only
//    operation that waits for the peers; no operation is a barrier beyond what its data needs.
//  - Bounded waits, no hangs. nccl: Wait(timeout) and AgreeSizes(..., timeout) return at the
//    latest after `timeout` (plus the time to abort). host: every operation runs inside its call,
//    bounded by the Communicator's op_timeout (silence from one peer for that long), and the
//    `timeout` arguments add nothing. A peer failure is kUnavailable and silence past the bound
//    kDeadlineExceeded, both naming this rank and the operation, and the peer rank when the
//    implementation can tell it (the host data plane can; NCCL cannot, and says so).
//  - Any failure, a timeout included, is final: the collectives abort (nccl: ncclCommAbort, so
//    that kernels stop and the peers fail too instead of waiting for their own bounds) and every
//    later call returns kFailedPrecondition carrying the first error (abort_status()).
//
// Thread-safety: thread-compatible; one thread at a time (the engine's).
#ifndef GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_H_
#define GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/memory_type.h"

namespace gravac::collectives {

// What a backend needs beyond its ranks (which come from the bootstrap Communicator).
struct DeviceCollectivesOptions {
  int device = 0;  // nccl: this rank's CUDA ordinal
  // nccl: the cudaStream_t to enqueue on (of `device`, outliving the collectives); nullptr: a
  // non-blocking stream of their own.
  void* stream = nullptr;
  // nccl: bound of the communicator's init (every rank joined) and of each enqueue.
  absl::Duration op_timeout = absl::Seconds(30);
};

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;  // aborts what is still in flight

  // "nccl" or "host".
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where the buffers of AllreduceSum and Allgatherv live.
  virtual MemoryType memory_type() const = 0;
  // The CUDA device of those buffers (nccl); -1 for host memory.
  virtual int device() const = 0;
  // The cudaStream_t the operations are enqueued on (nccl); nullptr for host.
  virtual void* stream() const = 0;

  // Starts data[i] = sum over ranks of data[i], for i < count (count may be 0). Does not wait.
  virtual absl::Status AllreduceSum(float* data, size_t count) = 0;

  // Every rank's byte count, bytes_per_rank[r] for rank r, from each rank's `bytes`. Blocks up to
  // `timeout` (see header comment).
  virtual absl::StatusOr<std::vector<size_t>> AgreeSizes(size_t bytes, absl::Duration timeout) = 0;

  // Starts the gather of every rank's payload into `recv` in rank order: rank r's
  // bytes_per_rank[r] bytes at offset sum(bytes_per_rank[0..r)). `send` holds this rank's
  // bytes_per_rank[rank()] bytes and does not overlap `recv`; `recv` holds the sum. Zero sizes are
  // allowed (null pointers then too). Does not wait.
  virtual absl::Status Allgatherv(const void* send, void* recv,
                                  absl::Span<const size_t> bytes_per_rank) = 0;

  // Blocks until every operation started is complete (OK), one failed, or `timeout` passed
  // (kDeadlineExceeded; the collectives are aborted). OK at once when nothing is in flight.
  virtual absl::Status Wait(absl::Duration timeout) = 0;

  // The first error, once aborted; OK before.
  virtual absl::Status abort_status() const = 0;
};

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_H_

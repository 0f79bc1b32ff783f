// The conformance cases of DeviceCollectives (daemon/collectives/device_collectives.h): the same
// list runs against every implementation, each rank on its own thread or process (the runners are
// the tests: device_collectives_test.cc for host over loopback and ucx, and
// nccl_device_collectives_test.cc for nccl on GPUs). A case's body runs on every rank taking part
// and checks that rank's results itself, returning what is wrong.
//
// Cases: exact integer sums at counts 0, 1, 7, p + 1 and 100003; random floats whose sum is
// compared bit for bit with the host ring's fixed order (every element of segment k summed from
// rank k rightwards, communicator.h) where the implementation promises it, otherwise against a
// serial sum within p ulps of the magnitudes, and equal on every rank; sizes agreed and payloads
// of unequal sizes gathered, some empty; every payload empty; operations started back to back
// under one Wait; and a peer that never arrives, which must fail every other rank within the
// bound with an error naming this rank, and the peer where the implementation can.
//
// Thread-safety: the cases are stateless; a body uses only its CaseEnv.
#ifndef GRAVAC_TESTS_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_CONFORMANCE_H_
#define GRAVAC_TESTS_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_CONFORMANCE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/collectives/device_collectives.h"

namespace gravac::collectives::conformance {

// Buffers in the memory the implementation carries (host: plain heap; nccl: cudaMalloc).
class BufferOps {
 public:
  virtual ~BufferOps() = default;
  virtual absl::StatusOr<void*> Alloc(size_t bytes) = 0;  // bytes may be 0 (nullptr then)
  virtual void Free(void* buffer) = 0;
  virtual absl::Status CopyIn(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyOut(void* host_dst, const void* src, size_t bytes) = 0;
};

class HostBufferOps : public BufferOps {
 public:
  absl::StatusOr<void*> Alloc(size_t bytes) override;
  void Free(void* buffer) override;
  absl::Status CopyIn(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyOut(void* host_dst, const void* src, size_t bytes) override;
};

enum class SumOrder {
  kHostRing,     // bit for bit the host ring's order, and the same bits on every rank
  kUnspecified,  // NCCL's choice: within a bound of the serial sum
};

struct CaseEnv {
  DeviceCollectives& dc;
  BufferOps& mem;
  SumOrder order;
  // Wait bound of the operations; the missing-peer case expects its error within it plus slack.
  absl::Duration bound;
};

struct ConformanceCase {
  std::string name;
  std::function<absl::Status(CaseEnv&)> body;
  // The last rank does not take part: the runner keeps it alive and silent (its transport open)
  // until the others are done. Only for world sizes >= 2.
  bool missing_peer = false;
};

std::vector<ConformanceCase> ConformanceCases();

}  // namespace gravac::collectives::conformance

#endif  // GRAVAC_TESTS_DAEMON_COLLECTIVES_DEVICE_COLLECTIVES_CONFORMANCE_H_

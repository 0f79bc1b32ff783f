// FileRendezvous: exchanges the transport address blobs of ranks 0..p-1 through a directory that
// all of them can see (one machine, or a shared file system), until the controller does this.
//
//   FileRendezvous rendezvous(dir, rank, world_size, absl::Seconds(30));
//   ASSIGN_OR_RETURN(std::vector<std::string> addresses,
//                    rendezvous.Exchange(transport->LocalAddress()));
//
// Publish writes <dir>/rank-<r>.addr atomically (write to a temporary name, then rename), so a
// reader never sees a partial blob. WaitForAll polls until every rank's file exists and returns
// the blobs indexed by rank; after `timeout` it fails with kDeadlineExceeded naming the missing
// ranks. The directory must be fresh for each job (stale files of an earlier job would be read);
// it is created if missing. Blobs are binary-safe.
//
// Thread-safety: thread-compatible; each rank uses its own FileRendezvous. Blocking: WaitForAll
// and Exchange block up to `timeout`; Publish does file I/O only.
#ifndef GRAVAC_DAEMON_TRANSPORT_RENDEZVOUS_H_
#define GRAVAC_DAEMON_TRANSPORT_RENDEZVOUS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gravac::transport {

class FileRendezvous {
 public:
  FileRendezvous(std::string dir, int rank, int world_size, absl::Duration timeout);

  absl::Status Publish(std::string_view blob);
  absl::StatusOr<std::vector<std::string>> WaitForAll();
  // Publish, then WaitForAll.
  absl::StatusOr<std::vector<std::string>> Exchange(std::string_view blob);

  // The file holding `rank`'s blob.
  std::string PathFor(int rank) const;

 private:
  std::string dir_;
  int rank_;
  int world_size_;
  absl::Duration timeout_;
};

}  // namespace gravac::transport

#endif  // GRAVAC_DAEMON_TRANSPORT_RENDEZVOUS_H_

// SharedBuffers: memory that the daemon has mapped and the worker uses for its own tensors
// (gravac_buffer_alloc). A request whose input lies inside one of them and whose result goes
// back in place borrows it: the daemon reads the input and writes the result there, so neither
// the input nor the result is copied through the staging arena. Buffers are carved out of memfd
// segments by an arena of their own, whose segment ids start at kFirstSegmentId (the staging
// arena's start at 1) and whose memfds are named gravac-shared-<id>. A buffer freed while
// requests borrow it is released when the last one returns it.
//
// Every Buffer shares ownership of its segment's mapping, so its memory stays valid after Free,
// Close and the end of the connection; only the daemon stops reading and writing it.
//
// Thread-safety: every method may be called from any thread. The register / release callbacks
// run under the internal mutex (they take the client's send lock, never its request lock).
#ifndef GRAVAC_CLIENT_SRC_SHARED_BUFFERS_H_
#define GRAVAC_CLIENT_SRC_SHARED_BUFFERS_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "client/src/staging.h"
#include "core/ipc/segment.h"
#include "core/mutex.h"

namespace gravac::client {

class SharedBuffers {
 public:
  static constexpr uint64_t kFirstSegmentId = uint64_t{1} << 48;

  struct Buffer {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;
    std::shared_ptr<const ipc::ShmSegment> mapping;  // keeps `data` mapped
  };

  SharedBuffers(uint64_t initial_bytes, StagingArena::RegisterFn on_register,
                StagingArena::ReleaseFn on_release);

  absl::StatusOr<Buffer> Allocate(uint64_t bytes);
  // Releases the buffer that starts at `data` now, or when its last borrow returns.
  absl::Status Free(const void* data);
  // If [data, data + bytes) lies inside a live buffer: counts a borrow of it, describes the range
  // in *block (segment, offset, bytes, data) and returns true.
  bool Borrow(const void* data, uint64_t bytes, StagingBlock* block);
  // Ends one borrow of the buffer that holds `data` (a block filled by Borrow).
  void Return(const void* data);
  // The connection is gone: no more callbacks; later frees only drop the bookkeeping.
  void Close();

  int live_buffers() const;
  int segment_count() const;

 private:
  struct Entry {
    StagingBlock block;
    int borrows = 0;
    bool freed = false;
  };
  using Entries = std::map<uintptr_t, Entry>;
  // The entry whose buffer holds [address, address + bytes), or end().
  Entries::iterator Find(uintptr_t address, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(Entries::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;  // core/mutex.h says why not absl::Mutex
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  StagingArena::RegisterFn on_register_;
  StagingArena::ReleaseFn on_release_;
  StagingArena arena_ ABSL_GUARDED_BY(mu_);  // calls back into the two above with mu_ held
  Entries entries_ ABSL_GUARDED_BY(mu_);     // by start address
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_SHARED_BUFFERS_H_

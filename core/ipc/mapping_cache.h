// MappingCache: gravacd's mappings of its workers' exported device allocations (cuda_ipc.h),
// the bookkeeping without the driver. Opening an IPC handle costs a driver call and a page-table
// update, so gravacd opens each exported allocation once and keeps the mapping while the worker
// keeps handing out buffers inside it (PyTorch's caching allocator serves many tensors from one
// block, step after step).
//
// Keys. A mapping is keyed by (worker, allocation base address) and remembers the allocation's
// size, device, the exporter's buffer id (CUDA's process-wide unique id of the allocation) and
// the handle bytes. A later export that matches all of them is a hit. The exporter's allocator
// may free a block and later allocate another one at the same or an overlapping address; since
// the live allocations of one address space never overlap, a cached mapping of that worker that
// has another buffer id, handle, size or device at the same base, or whose range overlaps the
// new allocation's, belongs to a freed block: it is closed and dropped before the new one is
// opened. At most `max_mappings` are kept; beyond that the least recently used is closed (a
// worker that frees blocks whose addresses never come back cannot grow the cache without bound).
// A mapping that a request still holds (MapPinned) is never closed for the bound: closing it
// would unmap the buffer under gravacd's pending reads and writes (a CUDA error). The cache may
// then exceed the bound until the requests end. The rules for freed blocks and disconnected
// workers close it even then: the worker itself gave the buffer up.
//
// The driver calls go through a MemHandleOpener (CudaIpcOpener in cuda_ipc.h; tests use fakes),
// so the rules above are tested without a GPU.
//
// Thread-safety: thread-compatible (one owner, e.g. the daemon's local server thread). The opener
// must outlive the cache.
#ifndef GRAVAC_CORE_IPC_MAPPING_CACHE_H_
#define GRAVAC_CORE_IPC_MAPPING_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/ipc/device_export.h"

namespace gravac::ipc {

// Opens and closes exported allocations in this process.
class MemHandleOpener {
 public:
  virtual ~MemHandleOpener() = default;
  // Maps the allocation `e` names (its mem_handle, on e.device); returns its base address here.
  // Blocks for the driver call. An error when the handle cannot be opened (freed, foreign, no
  // CUDA); the cache adds the worker and field to its message.
  virtual absl::StatusOr<void*> Open(const DeviceBufferExport& e) = 0;
  // Unmaps a base Open returned (on `device`). Errors are not reported: the mapping is gone
  // either way.
  virtual void Close(void* base, int device) = 0;
};

class MappingCache {
 public:
  static constexpr size_t kDefaultMaxMappings = 4096;

  explicit MappingCache(MemHandleOpener* opener, size_t max_mappings = kDefaultMaxMappings);
  MappingCache(const MappingCache&) = delete;
  MappingCache& operator=(const MappingCache&) = delete;
  ~MappingCache();  // closes every mapping

  // The buffer `e` names, mapped into this process: base of the (cached or newly opened)
  // mapping + e.offset. kInvalidArgument naming the worker and field when the export is
  // malformed (ValidateExport; no driver call); the opener's error code with a message naming
  // the worker, field device_handle, device and allocation when the handle cannot be opened
  // (nothing is cached then, and stale mappings it replaced stay closed).
  absl::StatusOr<void*> Map(int worker, const DeviceBufferExport& e);

  // A buffer mapped for a request: `data` as Map returns it, and `pin`, which keeps the mapping
  // from being closed for the bound while any copy of it lives (drop it when the request ends).
  struct Pinned {
    void* data = nullptr;
    std::shared_ptr<const void> pin;
  };
  absl::StatusOr<Pinned> MapPinned(int worker, const DeviceBufferExport& e);

  // Closes every mapping of `worker` (it disconnected).
  void DropWorker(int worker);

  int64_t opens() const { return opens_; }    // Open calls so far (failed ones included)
  int64_t closes() const { return closes_; }  // Close calls so far
  size_t size() const { return mappings_.size(); }

 private:
  struct Mapping {
    uint64_t allocation_bytes = 0;
    uint64_t buffer_id = 0;
    int device = -1;
    std::string handle;  // the kCudaIpcHandleBytes of the export that opened it
    void* base = nullptr;
    uint64_t last_use = 0;
    // Copies handed out by MapPinned; use_count() > 1 while a request holds one.
    std::shared_ptr<const void> pin = std::make_shared<const char>(0);
  };
  using Key = std::pair<int, uint64_t>;  // (worker, base address in the worker)

  bool Matches(const Mapping& m, const DeviceBufferExport& e) const;
  // Closes the mappings of `worker` whose range overlaps [base, base + bytes).
  void DropOverlapping(int worker, uint64_t base, uint64_t bytes);
  // Closes the least recently used mapping no request holds; false when every one is held.
  bool DropLeastRecentlyUsed();
  // Map's lookup or open; the mapping's entry.
  absl::StatusOr<std::map<Key, Mapping>::iterator> Find(int worker, const DeviceBufferExport& e);
  std::map<Key, Mapping>::iterator Erase(std::map<Key, Mapping>::iterator it);

  MemHandleOpener* opener_;
  size_t max_mappings_;
  std::map<Key, Mapping> mappings_;
  uint64_t clock_ = 0;
  int64_t opens_ = 0;
  int64_t closes_ = 0;
};

}  // namespace gravac::ipc

#endif  // GRAVAC_CORE_IPC_MAPPING_CACHE_H_

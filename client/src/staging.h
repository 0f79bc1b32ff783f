// StagingArena: the worker's shared-memory staging space. Inputs are copied into blocks of
// memfd segments the daemon has mapped; results come back in the same blocks. Blocks are carved
// first-fit (64-byte aligned) out of the newest segment; when a request does not fit, a segment
// of at least twice the size is created and registered with the daemon (through the callback)
// and older segments are released once their last block is freed.
//
// Thread-safety: not thread-safe; the client serializes calls under its lock.
#ifndef GRAVAC_CLIENT_SRC_STAGING_H_
#define GRAVAC_CLIENT_SRC_STAGING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipc/segment.h"

namespace gravac::client {

struct StagingBlock {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint8_t* data = nullptr;
};

class StagingArena {
 public:
  // Called when a segment is created (register it) or no longer used (release it).
  using RegisterFn = std::function<absl::Status(uint64_t id, const ipc::ShmSegment& segment)>;
  using ReleaseFn = std::function<void(uint64_t id)>;

  StagingArena(uint64_t initial_bytes, RegisterFn on_register, ReleaseFn on_release,
               uint64_t first_id = 1, std::string name = "gravac-staging");

  absl::StatusOr<StagingBlock> Allocate(uint64_t bytes);
  void Free(const StagingBlock& block);

  int segment_count() const { return static_cast<int>(segments_.size()); }
  uint64_t current_segment_bytes() const;
  // The mapping of segment `id` (null if there is none); it stays mapped while the pointer lives,
  // also after the arena released the segment.
  std::shared_ptr<const ipc::ShmSegment> Mapping(uint64_t id) const;

 private:
  struct Segment {
    std::shared_ptr<ipc::ShmSegment> shm;
    std::map<uint64_t, uint64_t> free;  // offset -> size
    int blocks = 0;
  };
  absl::Status Grow(uint64_t at_least);
  bool TryAllocate(uint64_t id, Segment& seg, uint64_t bytes, StagingBlock* out);

  uint64_t initial_bytes_;
  RegisterFn on_register_;
  ReleaseFn on_release_;
  std::map<uint64_t, std::unique_ptr<Segment>> segments_;
  uint64_t current_id_ = 0;
  uint64_t next_id_;
  std::string name_;
};

}  // namespace gravac::client

#endif  // GRAVAC_CLIENT_SRC_STAGING_H_

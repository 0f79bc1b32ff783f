#include "client/src/shared_buffers.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::client {

SharedBuffers::SharedBuffers(uint64_t initial_bytes, StagingArena::RegisterFn on_register,
                             StagingArena::ReleaseFn on_release)
    : on_register_(std::move(on_register)),
      on_release_(std::move(on_release)),
      arena_(
          initial_bytes,
          [this](uint64_t id, const ipc::ShmSegment& segment) {
            mu_.AssertHeld();  // the arena calls back from inside Allocate / Free
            if (closed_) return absl::FailedPreconditionError("the daemon connection is closed");
            return on_register_(id, segment);
          },
          [this](uint64_t id) {
            mu_.AssertHeld();
            if (!closed_) on_release_(id);
          },
          kFirstSegmentId, "gravac-shared") {}

absl::StatusOr<SharedBuffers::Buffer> SharedBuffers::Allocate(uint64_t bytes) {
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("the daemon connection is closed");
  ASSIGN_OR_RETURN(StagingBlock block, arena_.Allocate(bytes));
  entries_.emplace(reinterpret_cast<uintptr_t>(block.data), Entry{block});
  return Buffer{block.data, bytes, arena_.Mapping(block.segment_id)};
}

absl::Status SharedBuffers::Free(const void* data) {
  MutexLock lock(&mu_);
  auto it = entries_.find(reinterpret_cast<uintptr_t>(data));
  if (it == entries_.end() || it->second.freed) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%p is not the start of a live shared buffer", data));
  }
  it->second.freed = true;
  if (it->second.borrows == 0) Release(it);
  return absl::OkStatus();
}

bool SharedBuffers::Borrow(const void* data, uint64_t bytes, StagingBlock* block) {
  MutexLock lock(&mu_);
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  auto it = Find(address, bytes);
  if (it == entries_.end() || it->second.freed || closed_) return false;
  ++it->second.borrows;
  const StagingBlock& whole = it->second.block;
  *block = StagingBlock{whole.segment_id, whole.offset + (address - it->first), bytes,
                        const_cast<uint8_t*>(static_cast<const uint8_t*>(data))};
  return true;
}

void SharedBuffers::Return(const void* data) {
  MutexLock lock(&mu_);
  auto it = Find(reinterpret_cast<uintptr_t>(data), 0);
  if (it == entries_.end() || it->second.borrows == 0) return;
  if (--it->second.borrows == 0 && it->second.freed) Release(it);
}

void SharedBuffers::Close() {
  MutexLock lock(&mu_);
  closed_ = true;
}

int SharedBuffers::live_buffers() const {
  MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [address, entry] : entries_) n += entry.freed ? 0 : 1;
  return n;
}

int SharedBuffers::segment_count() const {
  MutexLock lock(&mu_);
  return arena_.segment_count();
}

SharedBuffers::Entries::iterator SharedBuffers::Find(uintptr_t address, uint64_t bytes) {
  auto it = entries_.upper_bound(address);
  if (it == entries_.begin()) return entries_.end();
  it = std::prev(it);
  const uint64_t size = it->second.block.bytes;
  if (address - it->first > size || bytes > size - (address - it->first)) return entries_.end();
  return it;
}

void SharedBuffers::Release(Entries::iterator it) {
  arena_.Free(it->second.block);
  entries_.erase(it);
}

}  // namespace gravac::client

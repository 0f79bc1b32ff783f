#include "client/src/staging.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::client {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

}  // namespace

StagingArena::StagingArena(uint64_t initial_bytes, RegisterFn on_register, ReleaseFn on_release,
                           uint64_t first_id, std::string name)
    : initial_bytes_(std::max<uint64_t>(AlignUp(initial_bytes), 4096)),
      on_register_(std::move(on_register)),
      on_release_(std::move(on_release)),
      next_id_(first_id),
      name_(std::move(name)) {}

uint64_t StagingArena::current_segment_bytes() const {
  auto it = segments_.find(current_id_);
  return it == segments_.end() ? 0 : it->second->shm->data_bytes();
}

std::shared_ptr<const ipc::ShmSegment> StagingArena::Mapping(uint64_t id) const {
  auto it = segments_.find(id);
  if (it == segments_.end()) return nullptr;
  return it->second->shm;
}

bool StagingArena::TryAllocate(uint64_t id, Segment& seg, uint64_t bytes, StagingBlock* out) {
  for (auto it = seg.free.begin(); it != seg.free.end(); ++it) {
    if (it->second < bytes) continue;
    const uint64_t offset = it->first;
    const uint64_t left = it->second - bytes;
    seg.free.erase(it);
    if (left > 0) seg.free.emplace(offset + bytes, left);
    ++seg.blocks;
    *out = StagingBlock{id, offset, bytes, seg.shm->data() + offset};
    return true;
  }
  return false;
}

absl::Status StagingArena::Grow(uint64_t at_least) {
  uint64_t size = initial_bytes_;
  if (auto it = segments_.find(current_id_); it != segments_.end()) {
    size = it->second->shm->data_bytes() * 2;
  }
  while (size < at_least) size *= 2;
  const uint64_t id = next_id_++;
  ASSIGN_OR_RETURN(ipc::ShmSegment shm,
                   ipc::ShmSegment::Create(absl::StrFormat("%s-%d", name_, id), size));
  auto seg = std::make_unique<Segment>();
  seg->shm = std::make_shared<ipc::ShmSegment>(std::move(shm));
  seg->free.emplace(0, size);
  RETURN_IF_ERROR(on_register_(id, *seg->shm));
  const uint64_t old = current_id_;
  segments_.emplace(id, std::move(seg));
  current_id_ = id;
  if (auto it = segments_.find(old); it != segments_.end() && it->second->blocks == 0) {
    segments_.erase(it);
    on_release_(old);
  }
  return absl::OkStatus();
}

absl::StatusOr<StagingBlock> StagingArena::Allocate(uint64_t bytes) {
  const uint64_t need = AlignUp(std::max<uint64_t>(bytes, 1));
  StagingBlock block;
  auto it = segments_.find(current_id_);
  if (it != segments_.end() && TryAllocate(current_id_, *it->second, need, &block)) {
    block.bytes = bytes;
    return block;
  }
  RETURN_IF_ERROR(Grow(need));
  if (!TryAllocate(current_id_, *segments_[current_id_], need, &block)) {
    return absl::InternalError("staging segment too small after growing");
  }
  block.bytes = bytes;
  return block;
}

void StagingArena::Free(const StagingBlock& block) {
  auto it = segments_.find(block.segment_id);
  if (it == segments_.end()) return;
  Segment& seg = *it->second;
  uint64_t offset = block.offset;
  uint64_t size = AlignUp(std::max<uint64_t>(block.bytes, 1));
  auto next = seg.free.lower_bound(offset);
  if (next != seg.free.end() && offset + size == next->first) {
    size += next->second;
    next = seg.free.erase(next);
  }
  if (next != seg.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      seg.free.erase(prev);
    }
  }
  seg.free.emplace(offset, size);
  if (--seg.blocks == 0 && block.segment_id != current_id_) {
    segments_.erase(it);
    on_release_(block.segment_id);
  }
}

}  // namespace gravac::client

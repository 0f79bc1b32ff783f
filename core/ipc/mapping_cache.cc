#include "core/ipc/mapping_cache.h"

#include <iterator>

#include "absl/strings/str_format.h"
#include "core/status.h"

namespace gravac::ipc {

MappingCache::MappingCache(MemHandleOpener* opener, size_t max_mappings)
    : opener_(opener), max_mappings_(max_mappings == 0 ? 1 : max_mappings) {}

MappingCache::~MappingCache() {
  for (auto it = mappings_.begin(); it != mappings_.end();) it = Erase(it);
}

bool MappingCache::Matches(const Mapping& m, const DeviceBufferExport& e) const {
  return m.allocation_bytes == e.allocation_bytes && m.buffer_id == e.buffer_id &&
         m.device == e.device &&
         m.handle.compare(0, std::string::npos, reinterpret_cast<const char*>(e.mem_handle),
                          kCudaIpcHandleBytes) == 0;
}

std::map<MappingCache::Key, MappingCache::Mapping>::iterator MappingCache::Erase(
    std::map<Key, Mapping>::iterator it) {
  opener_->Close(it->second.base, it->second.device);
  ++closes_;
  return mappings_.erase(it);
}

void MappingCache::DropOverlapping(int worker, uint64_t base, uint64_t bytes) {
  const uint64_t end = base + bytes;  // ValidateExport ruled out wrapping
  auto it = mappings_.lower_bound(Key{worker, base});
  // The mapping just below `base` may reach into the new range.
  if (it != mappings_.begin()) {
    auto prev = std::prev(it);
    if (prev->first.first == worker && prev->first.second + prev->second.allocation_bytes > base) {
      Erase(prev);
    }
  }
  while (it != mappings_.end() && it->first.first == worker && it->first.second < end) {
    it = Erase(it);
  }
}

bool MappingCache::DropLeastRecentlyUsed() {
  auto oldest = mappings_.end();
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
    if (it->second.pin.use_count() > 1) continue;  // a request is using it
    if (oldest == mappings_.end() || it->second.last_use < oldest->second.last_use) oldest = it;
  }
  if (oldest == mappings_.end()) return false;
  Erase(oldest);
  return true;
}

absl::StatusOr<std::map<MappingCache::Key, MappingCache::Mapping>::iterator> MappingCache::Find(
    int worker, const DeviceBufferExport& e) {
  RETURN_IF_ERROR(ValidateExport(worker, e));
  auto it = mappings_.find(Key{worker, e.base_address});
  if (it == mappings_.end() || !Matches(it->second, e)) {
    // Whatever this worker had mapped in the new allocation's range was freed.
    DropOverlapping(worker, e.base_address, e.allocation_bytes);
    while (mappings_.size() >= max_mappings_ && DropLeastRecentlyUsed()) {
    }
    ++opens_;
    absl::StatusOr<void*> base = opener_->Open(e);
    if (!base.ok()) {
      return absl::Status(
          base.status().code(),
          absl::StrFormat("worker %d, field device_handle (device %d, allocation 0x%x of %d "
                          "bytes): cannot open the IPC handle: %s",
                          worker, e.device, e.base_address, e.allocation_bytes,
                          base.status().message()));
    }
    Mapping m;
    m.allocation_bytes = e.allocation_bytes;
    m.buffer_id = e.buffer_id;
    m.device = e.device;
    m.handle.assign(reinterpret_cast<const char*>(e.mem_handle), kCudaIpcHandleBytes);
    m.base = *base;
    it = mappings_.emplace(Key{worker, e.base_address}, std::move(m)).first;
  }
  it->second.last_use = ++clock_;
  return it;
}

absl::StatusOr<void*> MappingCache::Map(int worker, const DeviceBufferExport& e) {
  ASSIGN_OR_RETURN(auto it, Find(worker, e));
  return static_cast<char*>(it->second.base) + e.offset;
}

absl::StatusOr<MappingCache::Pinned> MappingCache::MapPinned(int worker,
                                                            const DeviceBufferExport& e) {
  ASSIGN_OR_RETURN(auto it, Find(worker, e));
  return Pinned{static_cast<char*>(it->second.base) + e.offset, it->second.pin};
}

void MappingCache::DropWorker(int worker) {
  auto it = mappings_.lower_bound(Key{worker, 0});
  while (it != mappings_.end() && it->first.first == worker) it = Erase(it);
}

}  // namespace gravac::ipc

// MappingCache (core/ipc/mapping_cache.h) over a fake opener: one open per allocation, a reused
// block found, a freed block (new buffer id or handle at the same base, or an overlapping range)
// closed and replaced, open failures naming the worker and field, the LRU bound, DropWorker.
// The same cache over real cudaIpcOpenMemHandle is cuda_ipc_map_test.cc (gpu).
#include "core/ipc/mapping_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Maps each handle to a distinct fake base (0x1000 apart) and records what is open; a handle
// whose first byte is 0xff cannot be opened (a freed or foreign handle).
class FakeOpener : public MemHandleOpener {
 public:
  absl::StatusOr<void*> Open(const DeviceBufferExport& e) override {
    if (e.mem_handle[0] == 0xff) return absl::InvalidArgumentError("invalid resource handle");
    char* base = reinterpret_cast<char*>(next_);
    next_ += 0x1000000;
    open_[base] = e.device;
    return base;
  }
  void Close(void* base, int device) override {
    auto it = open_.find(static_cast<char*>(base));
    ASSERT_NE(it, open_.end()) << "closed a base that is not open";
    EXPECT_EQ(it->second, device);
    open_.erase(it);
    closed_.push_back(base);
  }
  size_t open_count() const { return open_.size(); }
  const std::vector<void*>& closed() const { return closed_; }

 private:
  uintptr_t next_ = 0x10000000;
  std::map<char*, int> open_;
  std::vector<void*> closed_;
};

DeviceBufferExport Export(uint64_t base, uint64_t size, uint64_t buffer_id, uint64_t offset = 0,
                          uint64_t bytes = 256) {
  DeviceBufferExport e;
  std::memset(e.mem_handle, static_cast<int>(buffer_id & 0x7f), sizeof(e.mem_handle));
  e.base_address = base;
  e.allocation_bytes = size;
  e.offset = offset;
  e.bytes = bytes;
  e.buffer_id = buffer_id;
  e.device = 0;
  return e;
}

TEST(MappingCacheTest, BuffersInOneAllocationShareOneOpen) {
  FakeOpener opener;
  MappingCache cache(&opener);
  ASSERT_OK_AND_ASSIGN(void* a, cache.Map(0, Export(0x7000000, 1 << 20, 1, 0)));
  ASSERT_OK_AND_ASSIGN(void* b, cache.Map(0, Export(0x7000000, 1 << 20, 1, 4096)));
  ASSERT_OK_AND_ASSIGN(void* again, cache.Map(0, Export(0x7000000, 1 << 20, 1, 0)));
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 4096);
  EXPECT_EQ(again, a);
  EXPECT_EQ(cache.opens(), 1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(opener.open_count(), 1u);
}

TEST(MappingCacheTest, WorkersAreKeptApart) {
  FakeOpener opener;
  MappingCache cache(&opener);
  // The same address in two workers' address spaces is two allocations.
  ASSERT_OK_AND_ASSIGN(void* w0, cache.Map(0, Export(0x7000000, 1 << 20, 1)));
  ASSERT_OK_AND_ASSIGN(void* w1, cache.Map(1, Export(0x7000000, 1 << 20, 1)));
  EXPECT_NE(w0, w1);
  EXPECT_EQ(cache.opens(), 2);
  cache.DropWorker(0);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(opener.closed(), std::vector<void*>{w0});
  ASSERT_OK_AND_ASSIGN(void* w1_again, cache.Map(1, Export(0x7000000, 1 << 20, 1)));
  EXPECT_EQ(w1_again, w1);
  EXPECT_EQ(cache.opens(), 2);
}

TEST(MappingCacheTest, AFreedBlockAtTheSameAddressIsClosedAndReopened) {
  FakeOpener opener;
  MappingCache cache(&opener);
  ASSERT_OK_AND_ASSIGN(void* old_base, cache.Map(0, Export(0x7000000, 1 << 20, 1)));
  // Freed and allocated again at the same address: a new buffer id (and handle).
  ASSERT_OK_AND_ASSIGN(void* new_base, cache.Map(0, Export(0x7000000, 1 << 20, 2)));
  EXPECT_NE(new_base, old_base);
  EXPECT_EQ(cache.opens(), 2);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(opener.closed(), std::vector<void*>{old_base});
  // Same buffer id but another size or handle is another allocation too.
  DeviceBufferExport bigger = Export(0x7000000, 2 << 20, 2);
  ASSERT_THAT(cache.Map(0, bigger).status(), IsOk());
  DeviceBufferExport rehandled = bigger;
  rehandled.mem_handle[5] ^= 1;
  ASSERT_THAT(cache.Map(0, rehandled).status(), IsOk());
  EXPECT_EQ(cache.opens(), 4);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(opener.open_count(), 1u);
}

TEST(MappingCacheTest, AnOverlappingNewAllocationDropsTheFreedOnes) {
  FakeOpener opener;
  MappingCache cache(&opener);
  ASSERT_OK_AND_ASSIGN(void* low, cache.Map(0, Export(0x1000000, 0x100000, 1)));
  ASSERT_OK_AND_ASSIGN(void* mid, cache.Map(0, Export(0x1100000, 0x100000, 2)));
  ASSERT_OK_AND_ASSIGN(void* high, cache.Map(0, Export(0x1300000, 0x100000, 3)));
  ASSERT_THAT(cache.Map(1, Export(0x1100000, 0x100000, 9)).status(), IsOk());  // another worker
  EXPECT_EQ(cache.size(), 4u);
  // A new allocation from inside `low` to inside `mid`: both were freed; `high` and worker 1's
  // allocation at the same address stay.
  ASSERT_THAT(cache.Map(0, Export(0x1080000, 0x100000, 4)).status(), IsOk());
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_THAT(opener.closed(), ::testing::UnorderedElementsAre(low, mid));
  ASSERT_OK_AND_ASSIGN(void* high_again, cache.Map(0, Export(0x1300000, 0x100000, 3)));
  EXPECT_EQ(high_again, high);
  // Adjacent (touching, not overlapping) allocations are both live.
  ASSERT_THAT(cache.Map(0, Export(0x1200000, 0x100000, 5)).status(), IsOk());
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(opener.closed().size(), 2u);
}

TEST(MappingCacheTest, AHandleThatCannotBeOpenedNamesTheWorkerAndFieldAndCachesNothing) {
  FakeOpener opener;
  MappingCache cache(&opener);
  ASSERT_OK_AND_ASSIGN(void* stale, cache.Map(2, Export(0x7000000, 1 << 20, 1)));
  DeviceBufferExport foreign = Export(0x7000000, 1 << 20, 2);
  foreign.mem_handle[0] = 0xff;
  EXPECT_THAT(cache.Map(2, foreign),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("worker 2"), HasSubstr("field device_handle"),
                             HasSubstr("0x7000000"), HasSubstr("invalid resource handle"))));
  // The mapping it would have replaced was freed in the worker: closed, not kept.
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(opener.closed(), std::vector<void*>{stale});
  EXPECT_EQ(cache.opens(), 2);
}

TEST(MappingCacheTest, MalformedExportsAreRefusedBeforeAnyOpen) {
  FakeOpener opener;
  MappingCache cache(&opener);
  DeviceBufferExport overrun = Export(0x7000000, 4096, 1, 4000, 200);
  EXPECT_THAT(cache.Map(1, overrun),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("worker 1"), HasSubstr("field bytes"))));
  DeviceBufferExport empty = Export(0x7000000, 0, 1, 0, 0);
  EXPECT_THAT(cache.Map(1, empty),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field allocation_bytes")));
  DeviceBufferExport wrapping = Export(~uint64_t{0} - 16, 4096, 1, 0, 16);
  EXPECT_THAT(cache.Map(1, wrapping),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field allocation_bytes")));
  DeviceBufferExport no_device = Export(0x7000000, 4096, 1);
  no_device.device = -1;
  EXPECT_THAT(cache.Map(1, no_device),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("field device")));
  EXPECT_EQ(cache.opens(), 0);
}

TEST(MappingCacheTest, TheLeastRecentlyUsedMappingGoesBeyondTheBound) {
  FakeOpener opener;
  MappingCache cache(&opener, 2);
  ASSERT_OK_AND_ASSIGN(void* a, cache.Map(0, Export(0x1000000, 0x1000, 1)));
  ASSERT_THAT(cache.Map(0, Export(0x2000000, 0x1000, 2)).status(), IsOk());
  ASSERT_THAT(cache.Map(0, Export(0x1000000, 0x1000, 1)).status(), IsOk());  // a is now the newest
  ASSERT_THAT(cache.Map(0, Export(0x3000000, 0x1000, 3)).status(), IsOk());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(opener.closed().size(), 1u);
  ASSERT_OK_AND_ASSIGN(void* a_again, cache.Map(0, Export(0x1000000, 0x1000, 1)));
  EXPECT_EQ(a_again, a);
  EXPECT_EQ(cache.opens(), 3);
}

TEST(MappingCacheTest, AMappingARequestHoldsIsNotClosedForTheBound) {
  FakeOpener opener;
  MappingCache cache(&opener, 2);
  ASSERT_OK_AND_ASSIGN(MappingCache::Pinned held, cache.MapPinned(0, Export(0x1000000, 0x1000, 1)));
  ASSERT_THAT(cache.Map(0, Export(0x2000000, 0x1000, 2)).status(), IsOk());
  // The held mapping is the least recently used, but a request is reading it: the other goes.
  ASSERT_THAT(cache.Map(0, Export(0x3000000, 0x1000, 3)).status(), IsOk());
  ASSERT_EQ(opener.closed().size(), 1u);
  EXPECT_NE(opener.closed()[0], held.data);
  // With every mapping held, the cache goes past its bound instead of unmapping one.
  ASSERT_OK_AND_ASSIGN(MappingCache::Pinned second,
                       cache.MapPinned(0, Export(0x3000000, 0x1000, 3)));
  ASSERT_OK_AND_ASSIGN(MappingCache::Pinned third,
                       cache.MapPinned(0, Export(0x4000000, 0x1000, 4)));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(opener.closed().size(), 1u);
  EXPECT_EQ(opener.open_count(), 3u);
  // A pin copied (the request moved on) still holds; once every request dropped it, the next
  // open closes the least recently used again and the cache is back within its bound.
  MappingCache::Pinned copy = held;
  held = {};
  second = {};
  third = {};
  ASSERT_THAT(cache.Map(0, Export(0x5000000, 0x1000, 5)).status(), IsOk());
  // 0x3000000 and 0x4000000 went; `copy` holds the first.
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(opener.closed().size(), 3u);
  EXPECT_EQ(std::count(opener.closed().begin(), opener.closed().end(), copy.data), 0);
  copy = {};
  ASSERT_THAT(cache.Map(0, Export(0x6000000, 0x1000, 6)).status(), IsOk());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(opener.closed().size(), 4u);
  // A freed block is closed even while pinned: the worker gave it up itself.
  ASSERT_OK_AND_ASSIGN(MappingCache::Pinned pinned,
                       cache.MapPinned(0, Export(0x6000000, 0x1000, 6)));
  ASSERT_THAT(cache.Map(0, Export(0x6000000, 0x1000, 7)).status(), IsOk());
  EXPECT_EQ(opener.closed().back(), pinned.data);
}

TEST(MappingCacheTest, DestructionClosesEveryMapping) {
  FakeOpener opener;
  {
    MappingCache cache(&opener);
    ASSERT_THAT(cache.Map(0, Export(0x1000000, 0x1000, 1)).status(), IsOk());
    ASSERT_THAT(cache.Map(3, Export(0x1000000, 0x1000, 1)).status(), IsOk());
    EXPECT_EQ(opener.open_count(), 2u);
  }
  EXPECT_EQ(opener.open_count(), 0u);
  EXPECT_EQ(opener.closed().size(), 2u);
}

}  // namespace
}  // namespace gravac::ipc

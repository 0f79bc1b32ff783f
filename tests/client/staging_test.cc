#include "client/src/staging.h"

#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::client {
namespace {

struct Recorder {
  std::vector<uint64_t> registered, released;
  StagingArena Make(uint64_t initial) {
    return StagingArena(
        initial,
        [this](uint64_t id, const ipc::ShmSegment&) {
          registered.push_back(id);
          return absl::OkStatus();
        },
        [this](uint64_t id) { released.push_back(id); });
  }
};

TEST(StagingArenaTest, AllocatesAlignedDisjointBlocksAndReusesFreedSpace) {
  Recorder r;
  StagingArena arena = r.Make(4096);
  auto a = arena.Allocate(100);
  auto b = arena.Allocate(1);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->offset % 64, 0u);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_GE(b->offset, a->offset + 100);
  EXPECT_EQ(r.registered.size(), 1u);
  arena.Free(*a);
  auto c = arena.Allocate(64);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->offset, a->offset);  // first fit reuses the freed block
  arena.Free(*b);
  arena.Free(*c);
  auto whole = arena.Allocate(4096);  // coalesced back into one free block
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(r.registered.size(), 1u);
}

TEST(StagingArenaTest, GrowsWhenFullAndReleasesTheOldSegmentWhenDrained) {
  Recorder r;
  StagingArena arena = r.Make(4096);
  auto a = arena.Allocate(3000);
  ASSERT_THAT(a, IsOk());
  auto b = arena.Allocate(3000);  // does not fit: a new segment of at least 8192
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(r.registered.size(), 2u);
  EXPECT_NE(a->segment_id, b->segment_id);
  EXPECT_GE(arena.current_segment_bytes(), 8192u);
  EXPECT_TRUE(r.released.empty());  // a still lives in the first segment
  arena.Free(*a);
  EXPECT_EQ(r.released, std::vector<uint64_t>{a->segment_id});
  auto big = arena.Allocate(1 << 20);  // far larger than twice: grows to fit
  ASSERT_THAT(big, IsOk());
  EXPECT_GE(arena.current_segment_bytes(), 1u << 20);
  big->data[(1 << 20) - 1] = 1;  // writable to the end
  arena.Free(*b);
  EXPECT_EQ(r.released.size(), 2u);
  EXPECT_EQ(arena.segment_count(), 1);
}

TEST(StagingArenaTest, ZeroByteBlocksAreDistinct) {
  Recorder r;
  StagingArena arena = r.Make(4096);
  auto a = arena.Allocate(0);
  auto b = arena.Allocate(0);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_NE(a->offset, b->offset);
  arena.Free(*a);
  arena.Free(*b);
}

}  // namespace
}  // namespace gravac::client

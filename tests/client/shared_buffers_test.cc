#include "client/src/shared_buffers.h"

#include <cstring>
#include <memory>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::client {
namespace {

using ::testing::Each;
using ::testing::Ge;

struct Recorder {
  std::vector<uint64_t> registered, released;
  std::unique_ptr<SharedBuffers> Make(uint64_t initial) {
    return std::make_unique<SharedBuffers>(
        initial,
        [this](uint64_t id, const ipc::ShmSegment&) {
          registered.push_back(id);
          return absl::OkStatus();
        },
        [this](uint64_t id) { released.push_back(id); });
  }
};

bool Overlap(const uint8_t* a, uint64_t an, const uint8_t* b, uint64_t bn) {
  return a < b + bn && b < a + an;
}

TEST(SharedBuffersTest, BorrowsOnlyRangesInsideALiveBuffer) {
  Recorder r;
  auto shared = r.Make(4096);
  auto buf = shared->Allocate(1000);
  ASSERT_THAT(buf.status(), IsOk());
  EXPECT_THAT(r.registered, Each(Ge(SharedBuffers::kFirstSegmentId)));
  ASSERT_EQ(r.registered.size(), 1u);

  StagingBlock whole, part;
  ASSERT_TRUE(shared->Borrow(buf->data, 1000, &whole));
  EXPECT_EQ(whole.segment_id, r.registered[0]);
  EXPECT_EQ(whole.data, buf->data);
  EXPECT_EQ(whole.bytes, 1000u);
  ASSERT_TRUE(shared->Borrow(buf->data + 100, 200, &part));
  EXPECT_EQ(part.segment_id, whole.segment_id);
  EXPECT_EQ(part.offset, whole.offset + 100);
  EXPECT_EQ(part.data, buf->data + 100);
  EXPECT_EQ(part.bytes, 200u);

  StagingBlock none;
  EXPECT_FALSE(shared->Borrow(buf->data + 900, 200, &none));  // runs past the end
  EXPECT_FALSE(shared->Borrow(buf->data + 1000, 1, &none));
  std::vector<uint8_t> private_memory(16);
  EXPECT_FALSE(shared->Borrow(private_memory.data(), 16, &none));
  shared->Return(whole.data);
  shared->Return(part.data);
}

TEST(SharedBuffersTest, FreeWaitsForTheLastBorrow) {
  Recorder r;
  auto shared = r.Make(4096);
  auto a = shared->Allocate(512);
  ASSERT_THAT(a.status(), IsOk());
  StagingBlock block;
  ASSERT_TRUE(shared->Borrow(a->data, 512, &block));
  ASSERT_THAT(shared->Free(a->data), IsOk());
  EXPECT_EQ(shared->live_buffers(), 0);
  EXPECT_FALSE(shared->Borrow(a->data, 512, &block));  // freed: no new borrows
  EXPECT_FALSE(shared->Free(a->data).ok());            // nor a second free

  // While the request still uses it, its space is not handed out again.
  auto b = shared->Allocate(512);
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_FALSE(Overlap(a->data, 512, b->data, 512));
  shared->Return(a->data);
  auto c = shared->Allocate(512);
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->data, a->data);                   // first fit: the returned space
  EXPECT_FALSE(shared->Free(c->data + 1).ok());  // not the start of a buffer
}

TEST(SharedBuffersTest, MemoryOutlivesCloseFreeAndTheRegistry) {
  Recorder r;
  auto shared = r.Make(4096);
  auto buf = shared->Allocate(8192);  // larger than the first segment: grows
  ASSERT_THAT(buf.status(), IsOk());
  std::memset(buf->data, 7, 8192);
  shared->Close();
  EXPECT_FALSE(shared->Allocate(16).ok());
  StagingBlock block;
  EXPECT_FALSE(shared->Borrow(buf->data, 16, &block));
  ASSERT_THAT(shared->Free(buf->data), IsOk());
  shared.reset();
  EXPECT_TRUE(r.released.empty());  // closed: the connection is not told any more
  ASSERT_NE(buf->mapping, nullptr);
  std::vector<uint8_t> expect(8192, 7);
  EXPECT_EQ(std::memcmp(buf->data, expect.data(), 8192), 0);
  buf->data[8191] = 1;  // still mapped read-write
}

}  // namespace
}  // namespace gravac::client

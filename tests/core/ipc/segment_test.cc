#include "core/ipc/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(ShmSegmentTest, CreateWritesHeaderAndMapSharesBytes) {
  auto a = ShmSegment::Create("test", 1 << 16);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->data_bytes(), 1u << 16);
  EXPECT_EQ(a->header().magic, kShmMagic);
  EXPECT_EQ(a->header().version, kShmAbiVersion);
  EXPECT_EQ(a->header().segment_bytes, kShmDataOffset + (1 << 16));
  auto b = ShmSegment::Map(UniqueFd(::dup(a->fd())), /*writable=*/true);
  ASSERT_THAT(b, IsOk());
  a->data()[123] = 42;
  EXPECT_EQ(b->data()[123], 42);
  b->data()[(1 << 16) - 1] = 7;
  EXPECT_EQ(a->data()[(1 << 16) - 1], 7);
}

TEST(ShmSegmentTest, MoveKeepsMapping) {
  auto a = ShmSegment::Create("test", 4096);
  ASSERT_THAT(a, IsOk());
  ShmSegment moved = std::move(*a);
  EXPECT_FALSE(a->valid());
  ASSERT_TRUE(moved.valid());
  moved.data()[0] = 1;
  EXPECT_EQ(moved.data()[0], 1);
}

// Writes a header variant into a fresh memfd of `file_bytes`, adds `seals` and maps it.
absl::Status MapWithHeader(uint64_t file_bytes, void (*mutate)(ShmSegmentHeader*),
                           int seals = kShmRequiredSeals) {
  UniqueFd fd(::memfd_create("bad", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (::ftruncate(fd.get(), static_cast<off_t>(file_bytes)) != 0) {
    return absl::InternalError("ftruncate");
  }
  ShmSegmentHeader h = MakeShmHeader(file_bytes);
  mutate(&h);
  if (::pwrite(fd.get(), &h, sizeof(h), 0) != sizeof(h)) return absl::InternalError("pwrite");
  if (seals != 0 && ::fcntl(fd.get(), F_ADD_SEALS, seals) != 0) {
    return absl::InternalError("F_ADD_SEALS");
  }
  return ShmSegment::Map(std::move(fd), false).status();
}

TEST(ShmSegmentTest, CreatedSegmentsCannotBeResized) {
  auto a = ShmSegment::Create("sealed", 4096);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(::fcntl(a->fd(), F_GET_SEALS) & kShmRequiredSeals, kShmRequiredSeals);
  EXPECT_NE(::ftruncate(a->fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(a->fd(), 1 << 20), 0);
  EXPECT_NE(::fcntl(a->fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);  // F_SEAL_SEAL: no more seals
  EXPECT_EQ(a->data()[4095], 0);                              // still mapped in full
}

TEST(ShmSegmentTest, UnsealedOrPartlySealedSegmentsAreRefused) {
  EXPECT_THAT(MapWithHeader(
                  8192, [](ShmSegmentHeader*) {}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not sealed")));
  EXPECT_THAT(MapWithHeader(
                  8192, [](ShmSegmentHeader*) {}, F_SEAL_GROW | F_SEAL_SEAL),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not sealed")));
  EXPECT_THAT(MapWithHeader(
                  8192, [](ShmSegmentHeader*) {}, F_SEAL_SHRINK | F_SEAL_GROW),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not sealed")));
}

TEST(ShmSegmentTest, FileThatIsNotAMemfdIsRefused) {
  char path[] = "/tmp/gravac_segment_XXXXXX";
  UniqueFd fd(::mkstemp(path));
  ASSERT_TRUE(fd.valid());
  ::unlink(path);
  ASSERT_EQ(::ftruncate(fd.get(), 8192), 0);
  EXPECT_THAT(ShmSegment::Map(std::move(fd), false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a sealable memfd")));
}

TEST(ShmSegmentTest, GoodHeaderAccepted) {
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader*) {}), IsOk());
}

TEST(ShmSegmentTest, BadMagicRejected) {
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader* h) { h->magic ^= 1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
}

TEST(ShmSegmentTest, BadVersionRejected) {
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader* h) { h->version = kShmAbiVersion + 1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ABI version")));
}

TEST(ShmSegmentTest, BadSizeRejected) {
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader* h) { h->segment_bytes = 1 << 20; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("segment_bytes")));
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader* h) { h->header_bytes = 32; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("header_bytes")));
  EXPECT_THAT(MapWithHeader(8192, [](ShmSegmentHeader* h) { h->data_bytes = 1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data_bytes")));
}

TEST(ShmSegmentTest, TooSmallFileRejected) {
  UniqueFd fd(::memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(fd.get(), 100), 0);
  ASSERT_EQ(::fcntl(fd.get(), F_ADD_SEALS, kShmRequiredSeals), 0);
  EXPECT_THAT(ShmSegment::Map(std::move(fd), false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("smaller than its header")));
}

}  // namespace
}  // namespace gravac::ipc

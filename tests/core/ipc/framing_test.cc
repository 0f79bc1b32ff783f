#include "core/ipc/framing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core/ipc/segment.h"
#include "core/ipc/unix_socket.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

// Reads frames until one is complete (blocking socket).
absl::StatusOr<Frame> ReadFrame(FrameReader& reader, int sock) {
  while (true) {
    auto next = reader.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) return std::move(**next);
    auto more = reader.ReadSome(sock);
    if (!more.ok()) return more.status();
    if (!*more) return absl::UnavailableError("eof");
  }
}

TEST(FramingTest, RoundTripsPayloadsOfManySizes) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  std::vector<std::string> payloads = {"", "x", std::string(1000, 'y'), std::string(300000, 'z')};
  for (size_t i = 0; i < payloads[3].size(); ++i) payloads[3][i] = static_cast<char>(i * 7);
  std::thread writer([&] {
    for (const auto& p : payloads) ASSERT_THAT(SendFrame(a.get(), p), IsOk());
  });
  FrameReader reader;
  for (const auto& p : payloads) {
    auto f = ReadFrame(reader, b.get());
    ASSERT_THAT(f, IsOk());
    EXPECT_EQ(f->payload, p);
    EXPECT_TRUE(f->fds.empty());
  }
  writer.join();
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FramingTest, PassesFileDescriptorsWithTheirFrame) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  auto seg = ShmSegment::Create("fdpass", 4096);
  ASSERT_THAT(seg, IsOk());
  seg->data()[10] = 99;
  ASSERT_THAT(SendFrame(a.get(), "first"), IsOk());
  ASSERT_THAT(SendFrame(a.get(), "with fd", {seg->fd()}), IsOk());
  ASSERT_THAT(SendFrame(a.get(), "two fds", {seg->fd(), seg->fd()}), IsOk());
  FrameReader reader;
  auto f1 = ReadFrame(reader, b.get());
  ASSERT_THAT(f1, IsOk());
  EXPECT_EQ(f1->payload, "first");
  EXPECT_TRUE(f1->fds.empty());
  auto f2 = ReadFrame(reader, b.get());
  ASSERT_THAT(f2, IsOk());
  EXPECT_EQ(f2->payload, "with fd");
  ASSERT_EQ(f2->fds.size(), 1u);
  auto mapped = ShmSegment::Map(std::move(f2->fds[0]), false);
  ASSERT_THAT(mapped, IsOk());
  EXPECT_EQ(mapped->data()[10], 99);
  auto f3 = ReadFrame(reader, b.get());
  ASSERT_THAT(f3, IsOk());
  EXPECT_EQ(f3->fds.size(), 2u);
  EXPECT_NE(f3->fds[0].get(), f3->fds[1].get());
}

TEST(FramingTest, NonBlockingReaderAssemblesPartialFrames) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  ASSERT_EQ(::fcntl(b.get(), F_SETFL, O_NONBLOCK), 0);
  FrameReader reader;
  auto nothing = reader.ReadSome(b.get());
  ASSERT_THAT(nothing, IsOk());
  EXPECT_TRUE(*nothing);
  // Header and half the payload by hand, then the rest.
  const std::string payload = "0123456789";
  uint8_t header[8] = {10, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(::write(a.get(), header, 8), 8);
  ASSERT_EQ(::write(a.get(), payload.data(), 5), 5);
  ASSERT_THAT(reader.ReadSome(b.get()), IsOk());
  auto none = reader.Next();
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->has_value());
  ASSERT_EQ(::write(a.get(), payload.data() + 5, 5), 5);
  ASSERT_THAT(reader.ReadSome(b.get()), IsOk());
  auto f = reader.Next();
  ASSERT_THAT(f, IsOk());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->payload, payload);
}

TEST(FramingTest, ReportsEndOfStream) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  a.Reset();
  FrameReader reader;
  auto more = reader.ReadSome(b.get());
  ASSERT_THAT(more, IsOk());
  EXPECT_FALSE(*more);
}

TEST(FramingTest, RejectsMalformedHeaderAndMissingFds) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  ASSERT_EQ(::write(a.get(), huge, 8), 8);
  FrameReader reader;
  ASSERT_THAT(reader.ReadSome(b.get()), IsOk());
  EXPECT_THAT(reader.Next(), StatusIs(absl::StatusCode::kDataLoss));

  UniqueFd c, d;
  ASSERT_THAT(SocketPair(&c, &d), IsOk());
  uint8_t claims_fd[9] = {1, 0, 0, 0, 1, 0, 0, 0, 'x'};
  ASSERT_EQ(::write(c.get(), claims_fd, 9), 9);
  FrameReader reader2;
  ASSERT_THAT(reader2.ReadSome(d.get()), IsOk());
  EXPECT_THAT(reader2.Next(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(FramingTest, SendRejectsOversizedFrames) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  EXPECT_THAT(SendFrame(a.get(), std::string(kMaxFramePayload + 1, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<int> fds(kMaxFrameFds + 1, a.get());
  EXPECT_THAT(SendFrame(a.get(), "x", fds), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FramingTest, SendToClosedPeerIsUnavailable) {
  UniqueFd a, b;
  ASSERT_THAT(SocketPair(&a, &b), IsOk());
  b.Reset();
  EXPECT_THAT(SendFrame(a.get(), "x"), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace gravac::ipc

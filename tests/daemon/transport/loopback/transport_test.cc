#include "daemon/transport/loopback/transport.h"

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::transport::loopback {
namespace {

using ::testing::HasSubstr;

TransportOptions Options(int rank, int world_size, TransportContext* context) {
  TransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.context = context;
  return options;
}

// Ranks 0..p-1 of one fabric, each connected to every peer (endpoints[r][peer]).
struct World {
  explicit World(int p) : fabric(p), endpoints(p) {
    for (int r = 0; r < p; ++r) {
      transports.push_back(*MakeTransport(Options(r, p, &fabric)));
      endpoints[r].resize(p);
    }
    for (int r = 0; r < p; ++r) {
      for (int peer = 0; peer < p; ++peer) {
        if (peer == r) continue;
        endpoints[r][peer] = *transports[r]->Connect(peer, transports[peer]->LocalAddress());
      }
    }
  }
  Endpoint& ep(int rank, int peer) { return *endpoints[rank][peer]; }

  Fabric fabric;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<std::unique_ptr<Endpoint>>> endpoints;
};

constexpr absl::Duration kLong = absl::Seconds(10);

TEST(LoopbackTransportTest, SendThenReceiveCopiesBytes) {
  World w(2);
  const std::vector<uint8_t> data = {1, 2, 3, 4, 5};
  std::vector<uint8_t> got(8, 0);
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(data.data(), data.size(), 7));
  ASSERT_OK_AND_ASSIGN(bool done, send->Test());
  EXPECT_FALSE(done);  // rendezvous: nothing to match yet
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(got.data(), got.size(), 7));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_THAT(send->Wait(kLong), IsOk());
  EXPECT_EQ(recv->bytes(), 5u);
  EXPECT_EQ(send->bytes(), 5u);
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 5), data);
  EXPECT_EQ(got[5], 0);
  EXPECT_EQ(w.fabric.messages_sent(0), 1);
  EXPECT_EQ(w.fabric.messages_sent(1), 0);
}

TEST(LoopbackTransportTest, TagsMatchIndependentlyAndInOrderWithinATag) {
  World w(2);
  const int a = 10, b = 20, c = 30;
  int got_tag1_first = 0, got_tag1_second = 0, got_tag2 = 0;
  ASSERT_OK_AND_ASSIGN(auto r2, w.ep(1, 0).Irecv(&got_tag2, sizeof(int), 2));
  ASSERT_OK_AND_ASSIGN(auto r1a, w.ep(1, 0).Irecv(&got_tag1_first, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto r1b, w.ep(1, 0).Irecv(&got_tag1_second, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto s1a, w.ep(0, 1).Isend(&a, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto s1b, w.ep(0, 1).Isend(&b, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(bool done, r2->Test());
  EXPECT_FALSE(done);
  ASSERT_OK_AND_ASSIGN(auto s2, w.ep(0, 1).Isend(&c, sizeof(int), 2));
  for (auto* r : {r1a.get(), r1b.get(), r2.get(), s1a.get(), s1b.get(), s2.get()}) {
    EXPECT_THAT(r->Wait(kLong), IsOk());
  }
  EXPECT_EQ(got_tag1_first, a);
  EXPECT_EQ(got_tag1_second, b);
  EXPECT_EQ(got_tag2, c);
}

TEST(LoopbackTransportTest, DirectionsAreSeparate) {
  World w(2);
  int from0 = 100, from1 = 200, at0 = 0, at1 = 0;
  ASSERT_OK_AND_ASSIGN(auto s0, w.ep(0, 1).Isend(&from0, sizeof(int), 5));
  ASSERT_OK_AND_ASSIGN(auto s1, w.ep(1, 0).Isend(&from1, sizeof(int), 5));
  ASSERT_OK_AND_ASSIGN(auto r0, w.ep(0, 1).Irecv(&at0, sizeof(int), 5));
  ASSERT_OK_AND_ASSIGN(auto r1, w.ep(1, 0).Irecv(&at1, sizeof(int), 5));
  EXPECT_THAT(r0->Wait(kLong), IsOk());
  EXPECT_THAT(r1->Wait(kLong), IsOk());
  EXPECT_EQ(at0, 200);
  EXPECT_EQ(at1, 100);
}

TEST(LoopbackTransportTest, ZeroByteMessagesAndNullBuffers) {
  World w(2);
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(nullptr, 0, 3));
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(nullptr, 0, 3));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_EQ(recv->bytes(), 0u);
  EXPECT_THAT(w.ep(0, 1).Isend(nullptr, 4, 3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LoopbackTransportTest, OversizedMessageFailsTheReceive) {
  World w(2);
  const std::vector<uint8_t> data(16, 9);
  std::vector<uint8_t> small(8, 0);
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(small.data(), small.size(), 1));
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(data.data(), data.size(), 1));
  EXPECT_THAT(recv->Wait(kLong),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("16 bytes from peer rank 0")));
  EXPECT_THAT(send->Wait(kLong), IsOk());
  EXPECT_EQ(small, std::vector<uint8_t>(8, 0));
}

TEST(LoopbackTransportTest, TagAboveUserRangeIsRejected) {
  World w(2);
  int x = 0;
  EXPECT_THAT(w.ep(0, 1).Isend(&x, sizeof(x), kMaxUserTag + 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(w.ep(0, 1).Irecv(&x, sizeof(x), kMaxUserTag), IsOk());
}

TEST(LoopbackTransportTest, WaitTimesOutAndTheRequestStaysUsable) {
  World w(2);
  int value = 42, got = 0;
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  const absl::Time start = absl::Now();
  EXPECT_THAT(recv->Wait(absl::Milliseconds(30)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("receive from rank 0")));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(&value, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_EQ(got, 42);
}

TEST(LoopbackTransportTest, DestroyedPendingReceiveIsCancelled) {
  World w(2);
  int value = 5, lost = 0, got = 0;
  { ASSERT_OK_AND_ASSIGN(auto cancelled, w.ep(1, 0).Irecv(&lost, sizeof(int), 1)); }
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(&value, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_EQ(got, 5);
  EXPECT_EQ(lost, 0);
}

TEST(LoopbackTransportTest, OperationsBeforeThePeerConnectsAreHeld) {
  Fabric fabric(2);
  ASSERT_OK_AND_ASSIGN(auto t0, MakeTransport(Options(0, 2, &fabric)));
  ASSERT_OK_AND_ASSIGN(auto t1, MakeTransport(Options(1, 2, &fabric)));
  ASSERT_OK_AND_ASSIGN(auto e0, t0->Connect(1, t1->LocalAddress()));
  int value = 77, got = 0;
  ASSERT_OK_AND_ASSIGN(auto send, e0->Isend(&value, sizeof(int), 9));
  ASSERT_OK_AND_ASSIGN(auto e1, t1->Connect(0, t0->LocalAddress()));
  ASSERT_OK_AND_ASSIGN(auto recv, e1->Irecv(&got, sizeof(int), 9));
  EXPECT_THAT(send->Wait(kLong), IsOk());
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_EQ(got, 77);
}

TEST(LoopbackTransportTest, ConnectValidatesAddresses) {
  Fabric fabric(3), other(3);
  ASSERT_OK_AND_ASSIGN(auto t0, MakeTransport(Options(0, 3, &fabric)));
  ASSERT_OK_AND_ASSIGN(auto t1, MakeTransport(Options(1, 3, &fabric)));
  ASSERT_OK_AND_ASSIGN(auto t2, MakeTransport(Options(2, 3, &fabric)));
  ASSERT_OK_AND_ASSIGN(auto f1, MakeTransport(Options(1, 3, &other)));

  EXPECT_THAT(t0->Connect(0, t0->LocalAddress()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(t0->Connect(3, t1->LocalAddress()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(t0->Connect(1, t2->LocalAddress()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not peer rank 1")));
  EXPECT_THAT(t0->Connect(1, f1->LocalAddress()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(t0->Connect(1, "garbage"), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto e01, t0->Connect(1, t1->LocalAddress()));
  EXPECT_EQ(e01->peer_rank(), 1);
  EXPECT_THAT(t0->Connect(1, t1->LocalAddress()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already connected")));
}

TEST(LoopbackTransportTest, MakeTransportNeedsAMatchingFabric) {
  Fabric fabric(2);
  EXPECT_THAT(MakeTransport(Options(0, 2, nullptr)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Fabric")));
  EXPECT_THAT(MakeTransport(Options(0, 3, &fabric)), StatusIs(absl::StatusCode::kInvalidArgument));
  TransportOptions with_params = Options(0, 2, &fabric);
  with_params.params = {{"UCX_TLS", "tcp"}};
  EXPECT_THAT(MakeTransport(with_params),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UCX_TLS")));
}

TEST(LoopbackTransportTest, CloseFailsPendingAndLaterOperationsOnBothSides) {
  World w(3);
  int got = 0, value = 1;
  ASSERT_OK_AND_ASSIGN(auto pending, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  w.ep(0, 1).Close();
  EXPECT_THAT(pending->Wait(kLong),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("rank 1: connection to peer rank 0 closed")));
  EXPECT_THAT(w.ep(0, 1).Isend(&value, sizeof(int), 1), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(w.ep(1, 0).Isend(&value, sizeof(int), 1), StatusIs(absl::StatusCode::kUnavailable));
  // Other pairs are unaffected.
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 2).Isend(&value, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(2, 0).Irecv(&got, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
}

TEST(LoopbackTransportTest, DestroyingAnEndpointClosesIt) {
  World w(2);
  int got = 0;
  ASSERT_OK_AND_ASSIGN(auto pending, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  w.endpoints[0][1].reset();
  EXPECT_THAT(pending->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(LoopbackTransportTest, CloseRankFailsEveryPeer) {
  World w(3);
  int a = 0, b = 0;
  ASSERT_OK_AND_ASSIGN(auto r0, w.ep(0, 2).Irecv(&a, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto r1, w.ep(1, 2).Irecv(&b, sizeof(int), 1));
  w.fabric.CloseRank(2);
  EXPECT_THAT(r0->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 2")));
  EXPECT_THAT(r1->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 2")));
}

TEST(LoopbackTransportTest, SilencedRankMovesNothingAndItsCloseIsNotSeen) {
  World w(2);
  int value = 3, got = 0;
  w.fabric.SilenceRank(1);
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(1, 0).Isend(&value, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(0, 1).Irecv(&got, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(absl::Milliseconds(20)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  w.ep(1, 0).Close();
  EXPECT_THAT(send->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable));  // its own op
  EXPECT_THAT(recv->Wait(absl::Milliseconds(20)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(got, 0);
}

TEST(LoopbackTransportTest, DroppedLinkCompletesSendsThatNeverArrive) {
  World w(2);
  w.fabric.SetLinkDrop(0, 1, true);
  int value = 3, got = 0;
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(&value, sizeof(int), 1));
  EXPECT_THAT(send->Wait(absl::ZeroDuration()), IsOk());
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(absl::Milliseconds(20)), StatusIs(absl::StatusCode::kDeadlineExceeded));
  w.fabric.SetLinkDrop(0, 1, false);
  ASSERT_OK_AND_ASSIGN(auto send2, w.ep(0, 1).Isend(&value, sizeof(int), 1));
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_EQ(got, 3);
}

TEST(LoopbackTransportTest, DelayedLinkDeliversAfterTheDelay) {
  World w(2);
  const absl::Duration delay = absl::Milliseconds(60);
  w.fabric.SetLinkDelay(0, 1, delay);
  int value = 8, got = 0;
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(auto recv, w.ep(1, 0).Irecv(&got, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(&value, sizeof(int), 1));
  ASSERT_OK_AND_ASSIGN(bool done, recv->Test());
  EXPECT_FALSE(done);
  EXPECT_THAT(recv->Wait(kLong), IsOk());
  EXPECT_GE(absl::Now() - start, delay);
  EXPECT_EQ(got, 8);
}

TEST(LoopbackTransportTest, FaultAfterMessagesClosesMidStream) {
  World w(2);
  w.fabric.FaultAfterMessages(0, 2, FaultKind::kClose);
  int values[3] = {1, 2, 3}, got[3] = {0, 0, 0};
  std::vector<std::unique_ptr<Request>> recvs;
  for (int i = 0; i < 3; ++i) {
    recvs.push_back(*w.ep(1, 0).Irecv(&got[i], sizeof(int), 1));
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto send, w.ep(0, 1).Isend(&values[i], sizeof(int), 1));
    EXPECT_THAT(send->Wait(kLong), IsOk());
  }
  EXPECT_THAT(recvs[0]->Wait(kLong), IsOk());
  EXPECT_THAT(recvs[1]->Wait(kLong), IsOk());
  EXPECT_THAT(recvs[2]->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(w.ep(0, 1).Isend(&values[2], sizeof(int), 1),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_EQ(w.fabric.messages_sent(0), 2);
}

TEST(LoopbackTransportTest, FaultAfterMessagesIsExactWhenMessagesMatchInABatch) {
  World w(2);
  w.fabric.SetLinkDelay(0, 1, absl::Milliseconds(20));  // all four become deliverable together
  w.fabric.FaultAfterMessages(0, 2, FaultKind::kClose);
  int values[4] = {1, 2, 3, 4}, got[4] = {0, 0, 0, 0};
  std::vector<std::unique_ptr<Request>> sends, recvs;
  for (int i = 0; i < 4; ++i) {
    sends.push_back(*w.ep(0, 1).Isend(&values[i], sizeof(int), 1));
    recvs.push_back(*w.ep(1, 0).Irecv(&got[i], sizeof(int), 1));
  }
  EXPECT_THAT(recvs[3]->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(recvs[0]->Wait(kLong), IsOk());
  EXPECT_THAT(recvs[1]->Wait(kLong), IsOk());
  EXPECT_THAT(recvs[2]->Wait(kLong), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(w.fabric.messages_sent(0), 2);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 2);
  EXPECT_EQ(got[2], 0);
  EXPECT_EQ(got[3], 0);
}

TEST(LoopbackTransportTest, ConcurrentRanksExchangeManyMessages) {
  constexpr int kP = 4, kMessages = 200;
  World w(kP);
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kP);
  for (int r = 0; r < kP; ++r) {
    threads.emplace_back([&, r] {
      const int right = (r + 1) % kP, left = (r + kP - 1) % kP;
      for (int i = 0; i < kMessages; ++i) {
        std::vector<int> out(100, r * 1000 + i), in(100, -1);
        auto recv = w.ep(r, left).Irecv(in.data(), in.size() * sizeof(int), i % 3);
        auto send = w.ep(r, right).Isend(out.data(), out.size() * sizeof(int), i % 3);
        if (!recv.ok() || !send.ok()) {
          results[r] = absl::InternalError("post failed");
          return;
        }
        absl::Status s = (*recv)->Wait(kLong);
        if (s.ok()) s = (*send)->Wait(kLong);
        if (!s.ok()) {
          results[r] = s;
          return;
        }
        if (in != std::vector<int>(100, left * 1000 + i)) {
          results[r] = absl::InternalError(absl::StrCat("rank ", r, " message ", i, " wrong"));
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kP; ++r) EXPECT_THAT(results[r], IsOk()) << "rank " << r;
}

}  // namespace
}  // namespace gravac::transport::loopback

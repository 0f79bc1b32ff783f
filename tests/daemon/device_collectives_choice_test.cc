// gravacd's choice of the engine's device collectives (daemon/device_collectives_choice.h): the
// rule over every node's part, and the agreement over a Communicator (loopback, one thread per
// node), where a refusal must reach every node with the same message, without a GPU.
#include "daemon/device_collectives_choice.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Setting = DeviceCollectivesSetting;

constexpr NodeDeviceCollectives kAble{Setting::kAuto, true, true};
constexpr NodeDeviceCollectives kNoNccl{Setting::kAuto, false, false};
constexpr NodeDeviceCollectives kNoIntake{Setting::kAuto, true, false};

NodeDeviceCollectives With(NodeDeviceCollectives n, Setting s) {
  n.setting = s;
  return n;
}

TEST(ParseDeviceCollectivesSettingTest, NamesAndRefusal) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, Setting>>{
           {" NCCL ", Setting::kNccl}, {"host", Setting::kHost}, {"auto", Setting::kAuto}}) {
    absl::StatusOr<Setting> got = ParseDeviceCollectivesSetting(text);
    ASSERT_THAT(got, IsOk()) << text;
    EXPECT_EQ(*got, want) << text;
  }
  EXPECT_THAT(ParseDeviceCollectivesSetting(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auto, host, nccl")));
  EXPECT_EQ(DeviceCollectivesSettingName(Setting::kNccl), "nccl");
}

TEST(ChooseDeviceCollectivesTest, AutoTakesNcclOnlyWhenEveryNodeCan) {
  auto all = ChooseDeviceCollectives({kAble, kAble, kAble});
  ASSERT_THAT(all, IsOk());
  EXPECT_TRUE(all->nccl);
  auto one_lacks = ChooseDeviceCollectives({kAble, kNoIntake, kAble});
  ASSERT_THAT(one_lacks, IsOk());
  EXPECT_FALSE(one_lacks->nccl);
  EXPECT_THAT(one_lacks->reason, AllOf(HasSubstr("node 1"), HasSubstr("no device intake")));
  auto unbuilt = ChooseDeviceCollectives({kNoNccl});
  ASSERT_THAT(unbuilt, IsOk());
  EXPECT_FALSE(unbuilt->nccl);
  EXPECT_THAT(unbuilt->reason, HasSubstr("built without NCCL"));
}

TEST(ChooseDeviceCollectivesTest, HostAnywhereIsHost) {
  auto host = ChooseDeviceCollectives({kAble, With(kAble, Setting::kHost)});
  ASSERT_THAT(host, IsOk());
  EXPECT_FALSE(host->nccl);
  EXPECT_THAT(host->reason, HasSubstr("node 1"));
}

TEST(ChooseDeviceCollectivesTest, NcclNeedsEveryNodeAndNamesBothSides) {
  auto ok = ChooseDeviceCollectives({With(kAble, Setting::kNccl), kAble});
  ASSERT_THAT(ok, IsOk());
  EXPECT_TRUE(ok->nccl);
  // The node that asked for nccl and the one that cannot carry device memory, each named.
  EXPECT_THAT(
      ChooseDeviceCollectives({kAble, With(kAble, Setting::kNccl), kNoIntake}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("--device_collectives=nccl (node 1)"), HasSubstr("device memory"),
                     HasSubstr("node 2"), HasSubstr("host memory"))));
  EXPECT_THAT(ChooseDeviceCollectives({With(kNoNccl, Setting::kNccl)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("node 0"), HasSubstr("built without NCCL"))));
  EXPECT_THAT(ChooseDeviceCollectives({With(kAble, Setting::kHost), With(kAble, Setting::kNccl)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("nccl on node 1"), HasSubstr("host on node 0"))));
}

// Every node's MakeJobDeviceCollectives over a loopback group, one thread each.
struct Outcome {
  absl::Status status;
  std::string name;
  bool nccl = false;
  std::string reason;
};

// A stand-in for the nccl collectives: host collectives, or `fails` on node `failing`.
NcclFactory FakeNccl(int failing, absl::Status fails) {
  return [failing, fails](collectives::Communicator& comm,
                          const collectives::DeviceCollectivesOptions&)
             -> absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>> {
    if (comm.rank() == failing) return fails;
    return collectives::MakeHostDeviceCollectives(comm);
  };
}

std::vector<Outcome> MakeOnEveryNode(const std::vector<NodeDeviceCollectives>& nodes,
                                     const NcclFactory& make_nccl = FakeNccl(-1, {})) {
  const int p = static_cast<int>(nodes.size());
  transport::loopback::Fabric fabric(p);
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::string> addresses;
  for (int r = 0; r < p; ++r) {
    transport::TransportOptions o;
    o.rank = r;
    o.world_size = p;
    o.context = &fabric;
    auto t = transport::MakeTransport("loopback", o);
    EXPECT_THAT(t, IsOk());
    addresses.push_back((*t)->LocalAddress());
    transports.push_back(*std::move(t));
  }
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
  for (int r = 0; r < p; ++r) {
    auto c = collectives::Communicator::Connect(*transports[r], addresses,
                                                {.op_timeout = absl::Seconds(20)});
    EXPECT_THAT(c, IsOk());
    comms.push_back(*std::move(c));
  }
  std::vector<Outcome> out(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      DeviceCollectivesChoice choice;
      auto dc = MakeJobDeviceCollectives(*comms[r], nodes[r], {}, &choice, make_nccl);
      out[r].status = dc.status();
      out[r].nccl = choice.nccl;
      out[r].reason = choice.reason;
      if (dc.ok()) {
        out[r].name = std::string((*dc)->name());
        // The host collectives work over the communicator they were agreed on.
        std::vector<float> one(3, 1.0f);
        out[r].status = (*dc)->AllreduceSum(one.data(), one.size());
        if (out[r].status.ok() && one[2] != static_cast<float>(p)) {
          out[r].status = absl::InternalError("wrong sum");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(MakeJobDeviceCollectivesTest, EveryNodeMakesTheSameHostCollectives) {
  for (const auto& nodes : std::vector<std::vector<NodeDeviceCollectives>>{
           {kAble, kNoIntake, kAble}, {With(kAble, Setting::kHost), kAble}, {kNoNccl}}) {
    std::vector<Outcome> out = MakeOnEveryNode(nodes);
    for (size_t r = 0; r < out.size(); ++r) {
      EXPECT_THAT(out[r].status, IsOk()) << "node " << r;
      EXPECT_EQ(out[r].name, "host") << "node " << r;
      EXPECT_FALSE(out[r].nccl);
    }
  }
}

TEST(MakeJobDeviceCollectivesTest, ARefusalReachesEveryNodeAlike) {
  std::vector<Outcome> out =
      MakeOnEveryNode({kAble, With(kAble, Setting::kNccl), kNoIntake, kAble});
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_THAT(out[r].status, StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr("(node 1)"), HasSubstr("node 2"))))
        << "node " << r;
    EXPECT_EQ(out[r].status, out[0].status);
  }
}

TEST(MakeJobDeviceCollectivesTest, AutoTakesNcclWhenEveryNodeMadeIt) {
  std::vector<Outcome> out = MakeOnEveryNode({kAble, kAble, kAble});
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_THAT(out[r].status, IsOk()) << "node " << r;
    EXPECT_TRUE(out[r].nccl) << "node " << r;
  }
}

// A node whose NCCL communicator fails: auto falls back to host on every node, naming it.
TEST(MakeJobDeviceCollectivesTest, AutoFallsBackToHostEverywhereWhenANodeFailsNccl) {
  std::vector<Outcome> out = MakeOnEveryNode(
      {kAble, kAble, kAble}, FakeNccl(1, absl::InternalError("ncclCommInitRankConfig failed")));
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_THAT(out[r].status, IsOk()) << "node " << r;
    EXPECT_EQ(out[r].name, "host");
    EXPECT_FALSE(out[r].nccl);
    EXPECT_THAT(out[r].reason, r == 1 ? HasSubstr("ncclCommInitRankConfig failed")
                                      : HasSubstr("node 1 could not make its NCCL communicator"));
  }
}

// ... and an nccl job fails on every node, the failing one with its own error.
TEST(MakeJobDeviceCollectivesTest, NcclFailsEverywhereWhenANodeFailsNccl) {
  std::vector<Outcome> out =
      MakeOnEveryNode({With(kAble, Setting::kNccl), kAble, kAble},
                      FakeNccl(2, absl::InternalError("ncclCommInitRankConfig failed")));
  for (size_t r = 0; r < out.size(); ++r) {
    if (r == 2) {
      EXPECT_THAT(out[r].status, StatusIs(absl::StatusCode::kInternal,
                                          HasSubstr("ncclCommInitRankConfig failed")));
    } else {
      EXPECT_THAT(out[r].status,
                  StatusIs(absl::StatusCode::kFailedPrecondition,
                           AllOf(HasSubstr("--device_collectives=nccl"),
                                 HasSubstr("node 2 could not make its NCCL communicator"))))
          << "node " << r;
    }
  }
}

}  // namespace
}  // namespace gravac::daemon

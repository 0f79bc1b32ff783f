#include "daemon/transport/transport_registry.h"

#include <string>

#include "core/testing/status_matchers.h"
#include "daemon/transport/loopback/fabric.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::transport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TransportOptions Options(int rank, int world_size, TransportContext* context) {
  TransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.context = context;
  return options;
}

TEST(TransportRegistryTest, LoopbackIsAlwaysBuiltAndListedFirst) {
  ASSERT_FALSE(TransportBackends().empty());
  EXPECT_EQ(TransportBackends()[0].name, "loopback");
  for (const TransportBackend& backend : TransportBackends()) {
    EXPECT_NE(backend.factory, nullptr) << backend.name;
  }
}

TEST(TransportRegistryTest, MakesALoopbackTransportByName) {
  loopback::Fabric fabric(2);
  ASSERT_OK_AND_ASSIGN(auto transport, MakeTransport("loopback", Options(1, 2, &fabric)));
  EXPECT_EQ(transport->name(), "loopback");
  EXPECT_EQ(transport->rank(), 1);
  EXPECT_EQ(transport->world_size(), 2);
  EXPECT_THAT(transport->LocalAddress(), HasSubstr("loopback:"));
}

TEST(TransportRegistryTest, UnknownNameListsTheBuiltBackends) {
  EXPECT_THAT(MakeTransport("carrier-pigeon", {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown transport 'carrier-pigeon'; built: loopback")));
}

TEST(TransportRegistryTest, EveryBackendDeclaresItsMemoryTypes) {
  for (const TransportBackend& backend : TransportBackends()) {
    // loopback and ucx copy host bytes; nccl moves device memory only.
    const bool device_only = backend.name == "nccl";
    EXPECT_EQ(backend.memory_types.host, !device_only) << backend.name;
    EXPECT_EQ(backend.memory_types.device, device_only) << backend.name;
  }
  loopback::Fabric fabric(1);
  ASSERT_OK_AND_ASSIGN(auto transport, MakeTransport("loopback", Options(0, 1, &fabric)));
  EXPECT_TRUE(transport->memory_types().Carries(MemoryType::kHost));
  EXPECT_FALSE(transport->memory_types().Carries(MemoryType::kDevice));
}

TEST(TransportRegistryTest, CheckCarriesNamesTheTransportAndTheMemoryType) {
  EXPECT_THAT(CheckCarries("loopback", MemoryType::kHost, "the test"), IsOk());
  EXPECT_THAT(CheckCarries("loopback", MemoryType::kDevice, "the test"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("transport 'loopback' carries host memory only"),
                             HasSubstr("the test exchanges device buffers"))));
  EXPECT_THAT(CheckCarries("carrier-pigeon", MemoryType::kHost, "the test"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown transport 'carrier-pigeon'")));
  bool nccl_built = false;
  for (const TransportBackend& backend : TransportBackends()) nccl_built |= backend.name == "nccl";
  if (nccl_built) {
    EXPECT_THAT(CheckCarries("nccl", MemoryType::kHost, "the test"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("transport 'nccl' carries device memory only"),
                               HasSubstr("exchanges host buffers"))));
    EXPECT_THAT(CheckCarries("nccl", MemoryType::kDevice, "the test"), IsOk());
  }
}

TEST(TransportRegistryTest, RankOutsideTheWorldIsRejectedBeforeTheFactory) {
  loopback::Fabric fabric(2);
  EXPECT_THAT(MakeTransport("loopback", Options(2, 2, &fabric)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2 outside")));
  EXPECT_THAT(MakeTransport("loopback", Options(0, 0, &fabric)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gravac::transport

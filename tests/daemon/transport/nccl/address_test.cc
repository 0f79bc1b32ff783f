// The nccl transport's address blobs (address.h): encoding and every rejection Connect relies on.
// Plain C++, no device needed.
#include "daemon/transport/nccl/address.h"

#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::transport::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Distinct, recognisable ids: every byte of the id rank -> q is 16 * rank + q (and 0xff at the
// end, so high nibbles are covered).
Address MakeAddress(int rank, int world_size) {
  Address address{.rank = rank, .world_size = world_size, .ids = {}};
  for (int q = 0; q < world_size; ++q) {
    std::string id;
    if (q != rank) {
      id.assign(kUniqueIdBytes, static_cast<char>(16 * rank + q));
      id.back() = static_cast<char>(0xff);
    }
    address.ids.push_back(id);
  }
  return address;
}

TEST(NcclAddressTest, EachRankGetsTheIdOfTheChannelToIt) {
  const std::string blob = EncodeAddress(MakeAddress(2, 4));
  EXPECT_THAT(blob, ::testing::StartsWith("nccl1:2:4:"));
  for (int self : {0, 1, 3}) {
    ASSERT_OK_AND_ASSIGN(std::string id, ParsePeerAddress(blob, self, /*peer_rank=*/2, 4));
    EXPECT_EQ(id, MakeAddress(2, 4).ids[self]) << "self rank " << self;
  }
}

TEST(NcclAddressTest, RejectsOtherBackendsAndMalformedBlobs) {
  const std::vector<std::string> bad = {
      "",
      "ucx:1:abcdef",
      "nccl1",
      "nccl1:1",
      "nccl1:1:2",
      "nccl1:x:2:,",
      "nccl0:1:2:" + std::string(2 * kUniqueIdBytes, 'a') + ",",
  };
  for (const std::string& blob : bad) {
    EXPECT_THAT(ParsePeerAddress(blob, 0, 1, 2),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("rank 0"), HasSubstr("peer rank 1"),
                               HasSubstr("not an nccl address"))))
        << "blob '" << blob << "'";
  }
}

TEST(NcclAddressTest, RejectsABlobOfAnotherRankOrWorld) {
  const std::string blob = EncodeAddress(MakeAddress(1, 3));
  EXPECT_THAT(ParsePeerAddress(blob, 0, /*peer_rank=*/2, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("belongs to rank 1")));
  EXPECT_THAT(
      ParsePeerAddress(blob, 0, 1, /*world_size=*/4),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is for a world of 3 ranks, not 4")));
}

TEST(NcclAddressTest, RejectsWrongIdCountLengthDigitsAndSelfEntry) {
  const std::string id_hex(2 * kUniqueIdBytes, 'a');
  // Two ids for a world of three.
  EXPECT_THAT(
      ParsePeerAddress("nccl1:1:3:" + id_hex + ",", 0, 1, 3),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("carries 2 channel ids, not 3")));
  // The id for rank 0 one digit short.
  EXPECT_THAT(ParsePeerAddress("nccl1:1:2:" + id_hex.substr(1) + ",", 0, 1, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has a 255-digit id for the channel to rank 0, not 256")));
  // Upper case and non-hex digits.
  std::string upper = id_hex;
  upper[10] = 'A';
  EXPECT_THAT(ParsePeerAddress("nccl1:1:2:" + upper + ",", 0, 1, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-hex digit")));
  std::string letter = id_hex;
  letter[255] = 'g';
  EXPECT_THAT(ParsePeerAddress("nccl1:1:2:" + letter + ",", 0, 1, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-hex digit")));
  // Rank 1's blob with an id for a channel 1 -> 1.
  EXPECT_THAT(ParsePeerAddress("nccl1:1:2:" + id_hex + "," + id_hex, 0, 1, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("channel to itself")));
}

TEST(NcclAddressTest, SingleRankWorldHasOneEmptyEntry) {
  EXPECT_EQ(EncodeAddress(MakeAddress(0, 1)), "nccl1:0:1:");
}

}  // namespace
}  // namespace gravac::transport::nccl

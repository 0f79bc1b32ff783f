#include "daemon/transport/nccl/address.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gravac::transport::nccl {
namespace {

constexpr char kPrefix[] = "nccl1";
constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string EncodeAddress(const Address& address) {
  std::string blob = absl::StrFormat("%s:%d:%d:", kPrefix, address.rank, address.world_size);
  for (size_t q = 0; q < address.ids.size(); ++q) {
    if (q > 0) blob.push_back(',');
    for (unsigned char byte : address.ids[q]) {
      blob.push_back(kHex[byte >> 4]);
      blob.push_back(kHex[byte & 15]);
    }
  }
  return blob;
}

absl::StatusOr<std::string> ParsePeerAddress(std::string_view blob, int self_rank, int peer_rank,
                                             int world_size) {
  const auto invalid = [&](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nccl: rank %d: the address given for peer rank %d %s", self_rank, peer_rank, what));
  };
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(blob.data(), blob.size()), absl::MaxSplits(':', 3));
  int blob_rank = -1, blob_world = -1;
  if (fields.size() != 4 || fields[0] != kPrefix || !absl::SimpleAtoi(fields[1], &blob_rank) ||
      !absl::SimpleAtoi(fields[2], &blob_world)) {
    return invalid("is not an nccl address (want \"nccl1:<rank>:<world size>:<ids>\")");
  }
  if (blob_rank != peer_rank) {
    return invalid(absl::StrFormat("belongs to rank %d", blob_rank));
  }
  if (blob_world != world_size) {
    return invalid(absl::StrFormat("is for a world of %d ranks, not %d", blob_world, world_size));
  }
  const std::vector<absl::string_view> ids = absl::StrSplit(fields[3], ',');
  if (static_cast<int>(ids.size()) != world_size) {
    return invalid(absl::StrFormat("carries %d channel ids, not %d", ids.size(), world_size));
  }
  if (!ids[peer_rank].empty()) return invalid("has an id for a channel to itself");
  const absl::string_view hex = ids[self_rank];
  if (hex.size() != 2 * kUniqueIdBytes) {
    return invalid(absl::StrFormat("has a %d-digit id for the channel to rank %d, not %d",
                                   hex.size(), self_rank, 2 * kUniqueIdBytes));
  }
  std::string id(kUniqueIdBytes, '\0');
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    const int high = HexValue(hex[2 * i]), low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return invalid(
          absl::StrFormat("has a non-hex digit in the id for the channel to rank %d", self_rank));
    }
    id[i] = static_cast<char>(static_cast<uint8_t>(high << 4 | low));
  }
  return id;
}

}  // namespace gravac::transport::nccl

#include "daemon/device_collectives_choice.h"

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/absl_compat.h"
#include "core/status.h"
#include "daemon/collectives/device_collectives_backends.h"

namespace gravac::daemon {
namespace {

// Why node `r` cannot run the nccl collectives ("" when it can).
std::string Lacks(const NodeDeviceCollectives& n, size_t r) {
  if (!n.nccl_built) {
    return absl::StrFormat("node %d's gravacd was built without NCCL (host memory only)", r);
  }
  if (!n.device_buffers) {
    return absl::StrFormat(
        "node %d's gravacd has no device intake (no usable CUDA device there), so its workers "
        "stage CUDA tensors through host memory: the job's buffers there are host memory",
        r);
  }
  return "";
}

}  // namespace

std::string_view DeviceCollectivesSettingName(DeviceCollectivesSetting s) {
  switch (s) {
    case DeviceCollectivesSetting::kHost:
      return "host";
    case DeviceCollectivesSetting::kNccl:
      return "nccl";
    case DeviceCollectivesSetting::kAuto:
      break;
  }
  return "auto";
}

absl::StatusOr<DeviceCollectivesSetting> ParseDeviceCollectivesSetting(std::string_view text) {
  const std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(AsAbsl(text)));
  if (t == "auto") return DeviceCollectivesSetting::kAuto;
  if (t == "host") return DeviceCollectivesSetting::kHost;
  if (t == "nccl") return DeviceCollectivesSetting::kNccl;
  return absl::InvalidArgumentError(StrCat("'", text, "' is not one of auto, host, nccl"));
}

absl::StatusOr<DeviceCollectivesChoice> ChooseDeviceCollectives(
    absl::Span<const NodeDeviceCollectives> nodes) {
  int nccl_node = -1, host_node = -1;
  std::string lacking;  // the first node that cannot run nccl, and why
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r].setting == DeviceCollectivesSetting::kNccl && nccl_node < 0) {
      nccl_node = static_cast<int>(r);
    }
    if (nodes[r].setting == DeviceCollectivesSetting::kHost && host_node < 0) {
      host_node = static_cast<int>(r);
    }
    if (lacking.empty()) lacking = Lacks(nodes[r], r);
  }
  if (nccl_node >= 0 && host_node >= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--device_collectives is nccl on node %d but host on node %d: one NCCL communicator "
        "needs every node; set the same on all of them",
        nccl_node, host_node));
  }
  if (nccl_node >= 0) {
    if (!lacking.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--device_collectives=nccl (node %d) carries device memory on every node, but %s; "
          "use --device_collectives=auto or host, or give that node a GPU and an NCCL build",
          nccl_node, lacking));
    }
    return DeviceCollectivesChoice{true, absl::StrFormat("nccl asked for (node %d)", nccl_node)};
  }
  if (host_node >= 0) {
    return DeviceCollectivesChoice{false, absl::StrFormat("host asked for (node %d)", host_node)};
  }
  if (!lacking.empty()) return DeviceCollectivesChoice{false, StrCat("auto: ", lacking)};
  return DeviceCollectivesChoice{true,
                                 "auto: every node has NCCL and takes its workers' device tensors"};
}

absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>> MakeJobDeviceCollectives(
    collectives::Communicator& comm, const NodeDeviceCollectives& mine,
    const collectives::DeviceCollectivesOptions& options, DeviceCollectivesChoice* choice,
    const NcclFactory& make_nccl) {
  constexpr size_t kRecord = 3;
  const int p = comm.size();
  std::vector<uint8_t> all(kRecord * p);
  uint8_t* own = all.data() + kRecord * comm.rank();
  own[0] = static_cast<uint8_t>(mine.setting);
  own[1] = mine.nccl_built ? 1 : 0;
  own[2] = mine.device_buffers ? 1 : 0;
  const std::vector<size_t> sizes(p, kRecord);
  RETURN_IF_ERROR(comm.Allgatherv(own, all.data(), sizes));
  std::vector<NodeDeviceCollectives> nodes(p);
  for (int r = 0; r < p; ++r) {
    const uint8_t* rec = all.data() + kRecord * r;
    if (rec[0] > static_cast<uint8_t>(DeviceCollectivesSetting::kNccl)) {
      return absl::DataLossError(
          absl::StrFormat("node %d sent a device collectives setting %d", r, rec[0]));
    }
    nodes[r] = {static_cast<DeviceCollectivesSetting>(rec[0]), rec[1] != 0, rec[2] != 0};
  }
  ASSIGN_OR_RETURN(DeviceCollectivesChoice chosen, ChooseDeviceCollectives(nodes));
  if (choice != nullptr) *choice = chosen;
  if (!chosen.nccl) return collectives::MakeHostDeviceCollectives(comm);

  absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>> nccl = make_nccl(comm, options);
  // A failed bootstrap broadcast aborted the communicator: nothing more can be agreed on it.
  if (!comm.abort_status().ok()) return nccl.status();
  std::vector<uint8_t> made(p, 0);
  made[comm.rank()] = nccl.ok() ? 1 : 0;
  RETURN_IF_ERROR(comm.Allgatherv(&made[comm.rank()], made.data(), std::vector<size_t>(p, 1)));
  int failed = -1;
  for (int r = 0; r < p && failed < 0; ++r) {
    if (made[r] == 0) failed = r;
  }
  if (failed < 0) return nccl;
  bool asked = false;
  for (const NodeDeviceCollectives& n : nodes)
    asked |= n.setting == DeviceCollectivesSetting::kNccl;
  const std::string why =
      nccl.ok()
          ? absl::StrFormat("node %d could not make its NCCL communicator (its log says why)",
                            failed)
          : StrCat("this node could not make its NCCL communicator: ", nccl.status().message());
  if (asked) {
    if (!nccl.ok()) return nccl.status();
    return absl::FailedPreconditionError(StrCat("--device_collectives=nccl: ", why));
  }
  nccl = absl::UnknownError("not used");  // aborts this node's communicator, if it made one
  chosen = {false, StrCat("auto, but ", why, "; host on every node")};
  if (choice != nullptr) *choice = chosen;
  return collectives::MakeHostDeviceCollectives(comm);
}

}  // namespace gravac::daemon

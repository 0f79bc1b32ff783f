// Which DeviceCollectives (daemon/collectives/device_collectives.h) a job's engine gets: the
// --device_collectives setting (auto | host | nccl), what each node can do, and the job-wide
// agreement on them, so that every node makes the same kind (an NCCL communicator needs them all)
// or the job is refused at start with a message naming the nodes and both sides.
//
// What a node can do. The nccl collectives carry device memory: a node can run them when its
// gravacd was built with NCCL (collectives/device_collectives_backends.h) and takes its workers'
// device tensors (device intake: built with CUDA, a usable device; without it the workers stage
// CUDA tensors through host memory and the job's buffers are host memory). The host collectives
// run everywhere.
//
// The rule (ChooseDeviceCollectives), the same on every node:
//  - nccl on one node and host on another: refused, naming both nodes;
//  - nccl on any node: nccl, and every node must be able to (else refused, naming the node, what
//    it lacks and the node that asked for nccl);
//  - host on any node: host;
//  - auto everywhere: nccl when every node can, else host, saying which node could not and why.
//
// Thread-safety: stateless functions; MakeJobDeviceCollectives uses the Communicator (one
// collective) on the calling thread, like any of its collectives.
#ifndef GRAVAC_DAEMON_DEVICE_COLLECTIVES_CHOICE_H_
#define GRAVAC_DAEMON_DEVICE_COLLECTIVES_CHOICE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/device_collectives.h"
#include "daemon/collectives/device_collectives_backends.h"

namespace gravac::daemon {

enum class DeviceCollectivesSetting { kAuto, kHost, kNccl };

// "auto", "host", "nccl".
std::string_view DeviceCollectivesSettingName(DeviceCollectivesSetting s);
// Case-insensitive; InvalidArgument listing the values otherwise.
absl::StatusOr<DeviceCollectivesSetting> ParseDeviceCollectivesSetting(std::string_view text);

// One node's part of the agreement.
struct NodeDeviceCollectives {
  DeviceCollectivesSetting setting = DeviceCollectivesSetting::kAuto;
  bool nccl_built = false;      // this gravacd has the nccl collectives
  bool device_buffers = false;  // this gravacd takes its workers' device tensors (device intake)
};

struct DeviceCollectivesChoice {
  bool nccl = false;
  std::string reason;  // for the log, e.g. "auto: node 1 has no device intake"
};

// The rule above over every node's part (nodes[r] is node r's). InvalidArgument for a refusal.
absl::StatusOr<DeviceCollectivesChoice> ChooseDeviceCollectives(
    absl::Span<const NodeDeviceCollectives> nodes);

// Makes the nccl collectives (collectives::MakeNcclDeviceCollectives; tests pass fakes).
using NcclFactory = std::function<absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>>(
    collectives::Communicator& bootstrap, const collectives::DeviceCollectivesOptions& options)>;

// Agrees the choice with the other nodes over `comm` (an Allgatherv of every node's part; the
// same collectives on every node, so it must run at the same point on all of them), then makes
// the DeviceCollectives chosen: host over `comm` (borrowed: see host_device_collectives.h), or
// nccl through `make_nccl` (bootstrapped over `comm` with `options`), after which the nodes
// agree whether every one of them made its communicator (a second Allgatherv): if one did not,
// auto falls back to host on every node, saying which node failed, and nccl fails on every node
// (FailedPrecondition naming it; that node returns its own error). `choice`, when given, gets the
// choice made. A refusal is the same InvalidArgument on every node.
absl::StatusOr<std::unique_ptr<collectives::DeviceCollectives>> MakeJobDeviceCollectives(
    collectives::Communicator& comm, const NodeDeviceCollectives& mine,
    const collectives::DeviceCollectivesOptions& options, DeviceCollectivesChoice* choice = nullptr,
    const NcclFactory& make_nccl = collectives::MakeNcclDeviceCollectives);

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_DEVICE_COLLECTIVES_CHOICE_H_

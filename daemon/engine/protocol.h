// The data-plane protocol: what the daemons of one job must share to work together, namely the
// negotiation messages (negotiation.h), the sparse wire format (kernels/wire_format.h) and the
// sparse-or-dense rule (fusion_plan.h, SendsCompressed). Each daemon reports it when it joins, and
// the controller refuses to assemble a job whose daemons report different values, so a job that
// mixes builds fails at start-up with both versions named instead of mid-training.
//
// Bump kDataPlaneProtocol whenever one of those changes in a way an older daemon would read or
// decide differently. History:
//   0  daemons built before the protocol was reported (JoinRequest field 10 absent)
//   1  varint-coded sparse indices (wire layout 3), a bounded response cache, and sparse sends
//      priced by SparseEncodedSizeBound with the compressor's MaxCount
//   2  Horovod's join: collective kind 4 (kJoin) in negotiation messages, joined nodes answering
//      the tensors they lack with zeros, the last joined rank agreed in listing order
//   3  Horovod's process sets: a tensor spec carries its set's global ranks, only the nodes
//      holding them list it, and it runs on the sub-communicator of those nodes
//   4  a tensor spec carries the memory type of the callers' tensors (host / device), one more
//      field every node must agree on
#ifndef GRAVAC_DAEMON_ENGINE_PROTOCOL_H_
#define GRAVAC_DAEMON_ENGINE_PROTOCOL_H_

#include <cstdint>

namespace gravac::daemon {

inline constexpr uint32_t kDataPlaneProtocol = 4;

}  // namespace gravac::daemon

#endif  // GRAVAC_DAEMON_ENGINE_PROTOCOL_H_

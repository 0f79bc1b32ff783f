// libFuzzer target: the control plane's proto conversions (proto/job_convert.h) over messages a
// controller or daemon receives. The first byte picks the message (Decision, JobConfig,
// StatsBatch), the rest is its serialized form. Checks: nothing crashes, and converting is
// idempotent (FromProto(ToProto(x)) gives back x, compared through the serialized form).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gravac/v1/controller.pb.h"
#include "proto/job_convert.h"

namespace {

template <typename Msg, typename Convert>
void RoundTrip(const uint8_t* data, size_t size, Convert convert) {
  Msg in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) return;
  Msg once, twice;
  convert(in, &once);
  convert(once, &twice);
  if (once.SerializeAsString() != twice.SerializeAsString()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  namespace p = gravac::proto;
  namespace v1 = gravac::v1;
  switch (data[0] % 3) {
    case 0:
      RoundTrip<v1::Decision>(data + 1, size - 1, [](const v1::Decision& m, v1::Decision* out) {
        p::ToProto(p::FromProto(m), out);
      });
      break;
    case 1:
      RoundTrip<v1::JobConfig>(data + 1, size - 1, [](const v1::JobConfig& m, v1::JobConfig* out) {
        p::ToProto(p::FromProto(m), out);
      });
      break;
    default:
      RoundTrip<v1::StatsBatch>(data + 1, size - 1,
                                [](const v1::StatsBatch& m, v1::StatsBatch* out) {
                                  out->set_node_rank(m.node_rank());
                                  for (const v1::NodeStepStats& s : m.stats()) {
                                    gravac::NodeStepStats x = p::FromProto(s, m.node_rank());
                                    if (x.node_rank != m.node_rank()) std::abort();
                                    p::ToProto(x, out->add_stats());
                                  }
                                });
      break;
  }
  return 0;
}

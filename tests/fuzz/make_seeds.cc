// Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/) from real encoders:
// wire-format encodings of each layout and value type, framed worker messages, serialized
// controller messages. `gravac-fuzz-seeds DIR` (scripts/fuzz.sh --seeds regenerates the
// checked-in corpus); the settings seeds are plain text files kept by hand.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/ipc/framing.h"
#include "gravac/v1/controller.pb.h"
#include "gravac/v1/worker.pb.h"
#include "kernels/cpu/randomk.h"
#include "kernels/wire_format.h"

namespace {

namespace fs = std::filesystem;
using gravac::kernels::Compressed;
using gravac::kernels::ValueType;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Encoded(const Compressed& c) {
  std::vector<uint8_t> out;
  if (!gravac::kernels::Encode(c, &out).ok()) {
    std::fprintf(stderr, "gravac-fuzz-seeds: cannot encode a seed\n");
    std::exit(1);
  }
  return std::string(out.begin(), out.end());
}

// A frame as core/ipc/framing.h lays it out (no fds).
std::string Frame(const gravac::v1::WorkerMessage& m) {
  const std::string payload = m.SerializeAsString();
  std::string out(gravac::ipc::kFrameHeaderBytes, '\0');
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + payload;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gravac-fuzz-seeds DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  // Wire format: each layout.
  const fs::path wire = root / "wire_format_fuzz";
  Compressed sparse{.dense_size = 100, .indices = {1, 5, 6, 40, 99}, .values = {1, -2, 3, 0.5f, 8}};
  Write(wire, "sparse_delta", Encoded(sparse));  // layout 3 (delta-coded)
  Compressed wide{.dense_size = 1 << 30, .indices = {0, 1 << 29}, .values = {1, 2}};
  Write(wire, "sparse_explicit", Encoded(wide));  // layout 0: gaps too wide for varints
  Compressed empty{.dense_size = 10};
  Write(wire, "sparse_empty", Encoded(empty));
  Compressed half = sparse;
  half.value_type = ValueType::kFloat16;
  Write(wire, "sparse_fp16", Encoded(half));
  Compressed dense{.dense_size = 6, .dense = true, .value_type = ValueType::kBFloat16,
                   .values = {1, 2, 3, 4, -1, 0}};
  Write(wire, "dense_bf16", Encoded(dense));
  Compressed randk{.dense_size = 64, .implicit_indices = true, .seed = 7};
  if (!gravac::kernels::cpu::RandomKIndices(64, 4, 7, &randk.indices).ok()) return 1;
  randk.values = {1, 2, 3, 4};
  Write(wire, "sparse_implicit", Encoded(randk));

  // Worker messages, framed.
  const fs::path ipc = root / "ipc_frames_fuzz";
  gravac::v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(1);
  hello.mutable_hello()->set_size(4);
  hello.mutable_hello()->set_local_size(2);
  hello.mutable_hello()->set_pid(123);
  gravac::v1::WorkerMessage req;
  gravac::v1::Request* r = req.mutable_request();
  r->set_id(1);
  r->set_name("grad.w");
  r->set_kind(gravac::v1::ALLREDUCE);
  r->set_dtype(gravac::v1::FLOAT32);
  r->add_shape(16);
  r->add_shape(4);
  r->set_segment_id(1);
  r->set_bytes(16 * 4 * 4);
  gravac::v1::WorkerMessage gather = req;
  gather.mutable_request()->set_kind(gravac::v1::ALLGATHER);
  gather.mutable_request()->set_dtype(gravac::v1::INT64);
  gather.mutable_request()->set_bytes(16 * 4 * 8);
  gravac::v1::WorkerMessage release;
  release.mutable_release_segment()->set_segment_id(1);
  gravac::v1::WorkerMessage bye;
  bye.mutable_shutdown();
  Write(ipc, "hello_request_shutdown", Frame(hello) + Frame(req) + Frame(bye));
  Write(ipc, "allgather_release", Frame(gather) + Frame(release));
  Write(ipc, "request", Frame(req));
  // A shape whose byte count wraps to 0 (SpecFromRequest accepted it before it checked).
  gravac::v1::WorkerMessage wrap = req;
  wrap.mutable_request()->clear_shape();
  wrap.mutable_request()->add_shape(int64_t{1} << 62);
  wrap.mutable_request()->add_shape(4);
  wrap.mutable_request()->set_bytes(0);
  Write(ipc, "overflowing_shape", Frame(wrap));

  // Controller messages: first byte 0 Decision, 1 JobConfig, 2 StatsBatch.
  const fs::path conv = root / "job_convert_fuzz";
  gravac::v1::Decision d;
  d.set_epoch(3);
  d.set_first_step(120);
  d.set_theta(40);
  d.set_theta_candidate(80);
  d.set_searching(true);
  d.set_phase("searching");
  d.set_gain_min(0.9);
  Write(conv, "decision", std::string(1, '\0') + d.SerializeAsString());
  gravac::v1::JobConfig jc;
  jc.set_compressor("topk");
  jc.set_theta_min(10);
  jc.set_theta_max(10000);
  jc.set_job_seed(5);
  jc.set_sparse_values("bf16");
  jc.set_norm_mode(gravac::v1::NORM_MODE_GLOBAL_SQUARED_L2);
  Write(conv, "job_config", std::string(1, '\1') + jc.SerializeAsString());
  gravac::v1::StatsBatch sb;
  sb.set_node_rank(1);
  gravac::v1::NodeStepStats* st = sb.add_stats();
  st->set_step(7);
  st->set_theta_used(10);
  st->set_n_g(2.5);
  st->set_step_seconds(0.1);
  st->set_samples(64);
  st->set_bytes_sent(1000);
  st->set_decision_epoch(3);
  Write(conv, "stats_batch", std::string(1, '\2') + sb.SerializeAsString());
  return 0;
}

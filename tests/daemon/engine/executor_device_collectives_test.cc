// The engine's device step (daemon/engine/executor_device.cc) without a GPU: two nodes (threads)
// whose Executors get DeviceCollectives in "device memory" (FakeNcclCollectives: memory_type
// kDevice, running the HostDeviceCollectives over a loopback data plane of their own, on the
// buffers of a FakeDeviceMemory, which is host memory of its own, and refusing any other memory),
// and device tensors on FakeDeviceBackend (the CPU twins of the CUDA kernels). Compared with the
// host path (the same job without device collectives) bit for bit: dense and sparse steps at
// θ_min, θ_c and another θ, sum and average, residuals carried over steps, the statistics' norms;
// that the device step ran (the double's calls) and that no collective ran on the executors' own
// data plane for it; that its results stay in device memory (TensorResult::device_data, read
// through ResultHostData) with no result byte copied to the host in the step, in buffers of their
// own from a pool, and go to the host once where the workers' device is unknown; a non-finite
// gradient failing the tensor on both nodes; a sum that fails in its result buffer synchronising
// before the buffer goes back to the pool; the groups that fall back to the host path (a mixed
// group, a process set, another compressor's sparse step); a failure of the collectives returned by
// Run.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/logging.h"
#include "core/testing/status_matchers.h"
#include "daemon/collectives/communicator.h"
#include "daemon/collectives/host_device_collectives.h"
#include "daemon/engine/executor.h"
#include "daemon/transport/loopback/fabric.h"
#include "daemon/transport/transport_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"
#include "tests/daemon/engine/engine_harness.h"
#include "tests/daemon/engine/fake_device_backend.h"

namespace gravac::daemon {
namespace {

using namespace ::gravac::daemon::testing;  // NOLINT
using ::testing::AllOf;
using ::testing::HasSubstr;

// DeviceCollectives in fake device memory: the HostDeviceCollectives over `comm`, every buffer
// checked to lie in `memory` (as NCCL would fault on host memory), its calls counted; fail_next
// makes the next operation of the given kind fail (as a peer's death would).
class FakeNcclCollectives : public collectives::DeviceCollectives {
 public:
  enum class Op { kAllreduceSum, kAgreeSizes, kAllgatherv, kWait };

  FakeNcclCollectives(collectives::Communicator& comm, std::shared_ptr<FakeDeviceMemory> memory)
      : host_(comm), memory_(std::move(memory)) {}

  std::string_view name() const override { return "fake-nccl"; }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  MemoryType memory_type() const override { return MemoryType::kDevice; }
  int device() const override { return 0; }
  void* stream() const override { return nullptr; }

  absl::Status AllreduceSum(float* data, size_t count) override {
    ++allreduce_sum;
    if (absl::Status s = Check(Op::kAllreduceSum, data, count * sizeof(float)); !s.ok()) return s;
    return host_.AllreduceSum(data, count);
  }
  absl::StatusOr<std::vector<size_t>> AgreeSizes(size_t bytes, absl::Duration timeout) override {
    ++agree_sizes;
    if (absl::Status s = Check(Op::kAgreeSizes, nullptr, 0); !s.ok()) return s;
    return host_.AgreeSizes(bytes, timeout);
  }
  absl::Status Allgatherv(const void* send, void* recv,
                          absl::Span<const size_t> bytes_per_rank) override {
    ++allgatherv;
    size_t total = 0;
    for (size_t b : bytes_per_rank) total += b;
    if (absl::Status s = Check(Op::kAllgatherv, send, bytes_per_rank[rank()]); !s.ok()) return s;
    if (absl::Status s = Check(Op::kAllgatherv, recv, total); !s.ok()) return s;
    absl::Status s = host_.Allgatherv(send, recv, bytes_per_rank);
    if (s.ok() && corrupt_rank_1_header && bytes_per_rank.size() > 1 &&
        bytes_per_rank[1] >= sizeof(int64_t)) {
      // Rank 1's first header claims more elements than any tensor has (the fake device memory
      // is host memory, so the test may write it).
      const int64_t huge = int64_t{1} << 40;
      std::memcpy(static_cast<uint8_t*>(recv) + bytes_per_rank[0], &huge, sizeof(huge));
    }
    return s;
  }
  absl::Status Wait(absl::Duration timeout) override {
    ++wait;
    if (absl::Status s = Check(Op::kWait, nullptr, 0); !s.ok()) return s;
    return host_.Wait(timeout);
  }
  absl::Status abort_status() const override {
    return failed_.ok() ? host_.abort_status() : failed_;
  }

  void FailNext(Op op) { fail_ = op, fail_armed_ = true; }
  int calls() const { return allreduce_sum + agree_sizes + allgatherv + wait; }

  int allreduce_sum = 0, agree_sizes = 0, allgatherv = 0, wait = 0;
  bool corrupt_rank_1_header = false;  // after each Allgatherv

 private:
  absl::Status Check(Op op, const void* p, size_t bytes) {
    if (!failed_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("fake nccl aborted: ", failed_.message()));
    }
    if (fail_armed_ && fail_ == op) {
      failed_ = absl::UnavailableError(absl::StrFormat("rank %d: fake nccl: peer failed", rank()));
      return failed_;
    }
    if (!memory_->Owns(p, bytes)) {
      return absl::InternalError(absl::StrFormat(
          "fake nccl: %d bytes at %p are not device memory (NCCL would fault)", bytes, p));
    }
    return absl::OkStatus();
  }

  collectives::HostDeviceCollectives host_;
  std::shared_ptr<FakeDeviceMemory> memory_;
  bool fail_armed_ = false;
  Op fail_ = Op::kWait;
  absl::Status failed_;
};

// Loopback transports and Communicators of `nodes` ranks on a fabric of their own.
struct DataPlane {
  explicit DataPlane(int nodes) : fabric(nodes) {
    std::vector<std::string> addresses;
    for (int r = 0; r < nodes; ++r) {
      transport::TransportOptions o;
      o.rank = r;
      o.world_size = nodes;
      o.context = &fabric;
      auto t = transport::MakeTransport("loopback", o);
      EXPECT_THAT(t, IsOk());
      addresses.push_back((*t)->LocalAddress());
      transports.push_back(*std::move(t));
    }
    collectives::CommunicatorOptions co;
    co.op_timeout = absl::Seconds(10);
    for (int r = 0; r < nodes; ++r) {
      auto comm = collectives::Communicator::Connect(*transports[r], addresses, co);
      EXPECT_THAT(comm, IsOk());
      comms.push_back(*std::move(comm));
    }
  }
  int64_t Messages() const {
    int64_t m = 0;
    for (int r = 0; r < fabric.world_size(); ++r) m += fabric.messages_sent(r);
    return m;
  }

  transport::loopback::Fabric fabric;
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
};

// One step's tensor on every node (as executor_pair.h's StepTensor, with the reduce op).
struct StepTensor {
  std::string name;
  std::vector<std::vector<float>> grads;  // per node
  MemoryType memory = MemoryType::kDevice;
  collectives::ReduceOp op = collectives::ReduceOp::kSum;
  std::vector<int> process_set;
  // NodeTensor::device of a device tensor: the CUDA device of the node's workers (the fake
  // collectives' is 0; -1: unknown, as for a tensor the client staged through host memory).
  int device = 0;
};

struct JobOptions {
  std::string compressor = "topk";  // "" = none
  bool device_collectives = true;
  int ranks_per_node = 1;
  Logger* log = nullptr;
  // Each executor's device backend factory fails from its call number this-many + 1 on (-1:
  // never); the first call makes the compression backend's.
  int backends_before_failing = -1;
};

// Two nodes' Executors over a loopback data plane; with device_collectives, each also gets a
// FakeNcclCollectives over a second data plane. Every device tensor's node sum is handed over in
// fake device memory (NodeTensor::device_data) when device_sums, else in host memory.
class DeviceJob {
 public:
  static constexpr int kNodes = 2;

  explicit DeviceJob(JobOptions options)
      : memory_(std::make_shared<FakeDeviceMemory>()), plane_(kNodes), nccl_plane_(kNodes) {
    std::vector<NodeLayout> layout;
    for (int n = 0; n < kNodes; ++n) {
      layout.push_back({n * options.ranks_per_node, options.ranks_per_node});
    }
    for (int r = 0; r < kNodes; ++r) {
      stats_.push_back(std::make_unique<FakeStats>());
      internal::ExecutorOptions e;
      e.node_rank = r;
      e.layout = layout;
      e.job.compressor = options.compressor.empty() ? "none" : options.compressor;
      e.job.theta_min = 10;
      e.job.theta_max = 1000;
      e.job.job_seed = 7;
      e.log = options.log;
      e.device_backends = FakeDeviceBackends(memory_);
      if (options.backends_before_failing >= 0) {
        auto calls = std::make_shared<int>(0);
        e.device_backends =
            [make = e.device_backends, calls, limit = options.backends_before_failing](
                int device) -> absl::StatusOr<std::unique_ptr<kernels::CompressionBackend>> {
          if ((*calls)++ >= limit) {
            return absl::ResourceExhaustedError("fake: out of device memory for a backend");
          }
          return make(device);
        };
      }
      if (options.device_collectives) {
        nccl_.push_back(std::make_unique<FakeNcclCollectives>(*nccl_plane_.comms[r], memory_));
        e.device_collectives = nccl_.back().get();
      }
      std::unique_ptr<kernels::Compressor> compressor;
      if (!options.compressor.empty()) {
        auto c = kernels::MakeCompressor(options.compressor, {});
        EXPECT_THAT(c, IsOk());
        compressor = *std::move(c);
      }
      auto x = internal::Executor::Create(std::move(e), plane_.comms[r].get(),
                                          std::move(compressor), stats_.back().get());
      EXPECT_THAT(x, IsOk());
      executors_.push_back(*std::move(x));
    }
  }

  internal::Executor& executor(int node) { return *executors_[node]; }
  FakeNcclCollectives& nccl(int node) { return *nccl_[node]; }
  std::shared_ptr<FakeDeviceMemory> memory() const { return memory_; }
  // Messages sent on the executors' own (host) data plane so far.
  int64_t HostMessages() const { return plane_.Messages(); }
  std::vector<NodeStepStats> Stats(int node) {
    executors_[node]->Flush();
    return stats_[node]->reports();
  }

  struct Output {
    std::vector<std::vector<TensorResult>> results;  // per node, in the order of the tensors
    std::vector<absl::Status> run;                   // per node: Run's status
  };
  // Runs `tensors` of `step` as one group at θ (1 = dense) with decision {step + 1, θ, θ_c}.
  Output Run(int64_t step, double theta, double theta_c, const std::vector<StepTensor>& tensors,
             bool device_sums) {
    std::vector<NodeTensor> data(kNodes * tensors.size());
    std::vector<std::vector<internal::WorkItem>> items(kNodes);
    internal::Group group;
    group.mode =
        theta > 1 ? internal::GroupMode::kSparseAllreduce : internal::GroupMode::kDenseAllreduce;
    group.theta = theta > 1 ? theta : 1.0;
    for (size_t t = 0; t < tensors.size(); ++t) group.members.push_back(t);
    for (int n = 0; n < kNodes; ++n) {
      for (size_t t = 0; t < tensors.size(); ++t) {
        const StepTensor& st = tensors[t];
        NodeTensor& nt = data[n * tensors.size() + t];
        nt = Allreduce(st.name, st.grads[n], true, step, st.op);
        nt.spec.memory = st.memory;
        nt.spec.process_set = st.process_set;
        nt.device = st.memory == MemoryType::kDevice ? st.device : -1;
        if (st.memory == MemoryType::kDevice && device_sums) {
          nt.device_data = FakeDeviceData::Make(0, memory_, st.grads[n]);
          nt.data.clear();
        }
        nt.samples = 8;
        internal::WorkItem w;
        w.ready.spec = nt.spec;
        w.ready.decision = Decision(step + 1, group.theta, theta_c);
        w.tensor = &nt;
        items[n].push_back(std::move(w));
      }
    }
    Output out{
        std::vector<std::vector<TensorResult>>(kNodes, std::vector<TensorResult>(tensors.size())),
        std::vector<absl::Status>(kNodes)};
    std::vector<std::future<absl::Status>> runs;
    for (int n = 0; n < kNodes; ++n) {
      runs.push_back(std::async(std::launch::async, [this, n, &group, &items, &out] {
        return executors_[n]->Run(group, items[n], &out.results[n]);
      }));
    }
    for (int n = 0; n < kNodes; ++n) out.run[n] = runs[n].get();
    return out;
  }

 private:
  std::shared_ptr<FakeDeviceMemory> memory_;
  DataPlane plane_;       // the executors' Communicators
  DataPlane nccl_plane_;  // the fake nccl's
  std::vector<std::unique_ptr<FakeNcclCollectives>> nccl_;
  std::vector<std::unique_ptr<FakeStats>> stats_;
  std::vector<std::unique_ptr<internal::Executor>> executors_;  // last: joined first
};

std::vector<StepTensor> Tensors(std::mt19937& rng, collectives::ReduceOp op) {
  // 200000 elements at θ = 10: a payload above the host path's overlap threshold (64 KiB).
  std::vector<StepTensor> tensors = {{"conv", {}, MemoryType::kDevice, op, {}},
                                     {"fc", {}, MemoryType::kDevice, op, {}}};
  const int sizes[] = {200000, 57};
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int n = 0; n < DeviceJob::kNodes; ++n) tensors[t].grads.push_back(Gradient(rng, sizes[t]));
  }
  return tensors;
}

struct PlannedStep {
  double theta;    // the group's θ (1 = dense)
  double theta_c;  // the decision's candidate
};
// θ_min = 10: sent at θ_min (candidate after the send), at θ_c (θ_min's level after the send),
// at a θ that is neither, with a candidate below θ_min (no multi-level), dense, and again.
const std::vector<PlannedStep> kSteps = {{10, 40}, {40, 40}, {25, 40}, {10, 5},
                                         {1, 40},  {40, 40}, {10, 40}, {10, 10}};

// A result's bytes in host memory, read through ResultHostData (one copy from the device for a
// result in device memory; the result itself is left as it is).
std::vector<uint8_t> HostBytes(const TensorResult& r) {
  TensorResult copy = r;
  copy.data = r.data;
  EXPECT_THAT(ResultHostData(copy), IsOk());
  return copy.data;
}

void ExpectSameResults(const DeviceJob::Output& got, const DeviceJob::Output& want,
                       const std::vector<StepTensor>& tensors) {
  for (int n = 0; n < DeviceJob::kNodes; ++n) {
    EXPECT_THAT(got.run[n], IsOk());
    EXPECT_THAT(want.run[n], IsOk());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const TensorResult& g = got.results[n][t];
      const TensorResult& w = want.results[n][t];
      EXPECT_EQ(g.status, w.status) << tensors[t].name << " node " << n;
      EXPECT_EQ(g.collective, w.collective);
      EXPECT_EQ(g.theta, w.theta);
      // Bytes: NaNs compare too. The host path's results are in host memory.
      EXPECT_EQ(w.device_data, nullptr);
      EXPECT_EQ(HostBytes(g), w.data) << tensors[t].name << " node " << n;
    }
  }
}

// The device step's bytes on the wire of a sparse group at θ (every node's block is the same
// size here: no errors): the other node's block, 8 bytes of header per tensor and k int32
// indices and k fp32 values.
int64_t SparseBlockBytes(const std::vector<StepTensor>& tensors, double theta) {
  int64_t bytes = 0;
  for (const StepTensor& t : tensors) {
    bytes += 8 + 8 * kernels::KeepCount(static_cast<int64_t>(t.grads[0].size()), theta);
  }
  return bytes;
}

TEST(ExecutorDeviceCollectivesTest, StepsMatchTheHostPathBitForBit) {
  for (const auto op : {collectives::ReduceOp::kSum, collectives::ReduceOp::kAverage}) {
    for (const bool device_sums : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (op == collectives::ReduceOp::kSum ? "sum" : "average")
                                        << (device_sums ? ", device sums" : ", host sums"));
      DeviceJob device({});
      DeviceJob host({.device_collectives = false});
      std::mt19937 rng(21);
      std::vector<int64_t> block_bytes(kSteps.size());
      for (size_t s = 0; s < kSteps.size(); ++s) {
        SCOPED_TRACE(::testing::Message() << "step " << s << " at theta " << kSteps[s].theta);
        const std::vector<StepTensor> tensors = Tensors(rng, op);
        block_bytes[s] = SparseBlockBytes(tensors, kSteps[s].theta);
        const int64_t host_messages = device.HostMessages();
        const int calls[] = {device.nccl(0).calls(), device.nccl(1).calls()};
        const int reduces = device.nccl(0).allreduce_sum, gathers = device.nccl(0).allgatherv;
        const int64_t to_host = device.memory()->to_host, from_host = device.memory()->from_host;
        const int64_t within = device.memory()->within;
        const auto got = device.Run(static_cast<int64_t>(s), kSteps[s].theta, kSteps[s].theta_c,
                                    tensors, device_sums);
        const int64_t step_to_host = device.memory()->to_host - to_host;
        const int64_t step_within = device.memory()->within - within;
        const auto want = host.Run(static_cast<int64_t>(s), kSteps[s].theta, kSteps[s].theta_c,
                                   tensors, device_sums);
        // Every result stayed in device memory of the workers' device (0), in a buffer of its own.
        int64_t results = 0;
        for (const StepTensor& t : tensors)
          results += 2 * 4 * static_cast<int64_t>(t.grads[0].size());
        for (int n = 0; n < 2; ++n) {
          for (size_t t = 0; t < tensors.size(); ++t) {
            const TensorResult& r = got.results[n][t];
            ASSERT_NE(r.device_data, nullptr) << tensors[t].name << " node " << n;
            EXPECT_EQ(r.device_data->device(), 0);
            EXPECT_EQ(ResultBytes(r), 4 * tensors[t].grads[n].size());
            EXPECT_TRUE(r.data.empty());
            EXPECT_TRUE(device.memory()->Owns(r.device_data->data(), r.device_data->bytes()));
          }
        }
        // Read through ResultHostData: the host path's bits, each result copied to the host once.
        const int64_t before_reading = device.memory()->to_host;
        ExpectSameResults(got, want, tensors);
        EXPECT_EQ(device.memory()->to_host - before_reading, results);
        const bool dense = kSteps[s].theta <= 1;
        // The device step ran, over the collectives alone.
        EXPECT_EQ(device.HostMessages(), host_messages);
        const int64_t headers = dense ? 0 : 2 * 8 * static_cast<int64_t>(tensors.size());
        // What crossed to the host in the step, both nodes together: no result (they stayed in
        // device memory), only on a sparse step the headers, from each of the two blocks.
        EXPECT_EQ(step_to_host, 2 * headers);
        // Within the device, both nodes together: on a dense step p staged into the fused buffer
        // and each result copied out of it into a buffer of its own; on a sparse step only the
        // messages into the node's block (each sum is built in its result buffer, no copy).
        const int64_t messages = block_bytes[s] - 8 * static_cast<int64_t>(tensors.size());
        EXPECT_EQ(step_within, dense ? 2 * results : 2 * messages);
        if (device_sums) {
          // And to the device: on a sparse step every node's headers (8 bytes per tensor); the
          // sums (given in device memory, FakeDeviceData's own copy in) and the messages never
          // cross.
          int64_t given = 0;
          for (const StepTensor& t : tensors)
            given += 2 * 4 * static_cast<int64_t>(t.grads[0].size());
          EXPECT_EQ(device.memory()->from_host - from_host, given + headers);
        }
        for (int n = 0; n < 2; ++n) EXPECT_GT(device.nccl(n).calls(), calls[n]);
        EXPECT_EQ(device.nccl(0).allreduce_sum, reduces + (dense ? 1 : 0));
        EXPECT_EQ(device.nccl(0).allgatherv, gathers + (dense ? 0 : 1));
        for (int n = 0; n < 2; ++n) {
          for (const StepTensor& t : tensors) {
            const std::vector<float> e = device.executor(n).Residual(t.name);
            ASSERT_EQ(e.size(), t.grads[n].size());
            EXPECT_EQ(e, host.executor(n).Residual(t.name)) << t.name << " node " << n;
            EXPECT_EQ(device.executor(n).ResidualBackend(t.name), "fake-cuda");
          }
        }
      }
      // The residuals were carried: after the dense step (4) they are non-zero again.
      EXPECT_NE(device.executor(0).Residual("conv"), std::vector<float>(200000, 0.0f));
      for (int n = 0; n < 2; ++n) {
        const std::vector<NodeStepStats> got = device.Stats(n), want = host.Stats(n);
        ASSERT_EQ(got.size(), kSteps.size());
        ASSERT_EQ(want.size(), kSteps.size());
        for (size_t s = 0; s < got.size(); ++s) {
          EXPECT_GT(got[s].n_g, 0.0);
          EXPECT_EQ(got[s].n_g, want[s].n_g) << "step " << s;
          EXPECT_EQ(got[s].n_min, want[s].n_min) << "step " << s;
          EXPECT_EQ(got[s].n_c, want[s].n_c) << "step " << s;
          EXPECT_EQ(got[s].theta_used, want[s].theta_used) << "step " << s;
          EXPECT_EQ(got[s].bytes_dense, want[s].bytes_dense) << "step " << s;
          if (kSteps[s].theta <= 1) {
            EXPECT_EQ(got[s].bytes_sent, want[s].bytes_sent) << "step " << s;
          } else {
            // Every block but the right neighbour's: with two nodes, its own.
            EXPECT_EQ(got[s].bytes_sent, block_bytes[s]) << "step " << s;
          }
        }
      }
    }
  }
}

// A result stays in device memory only when the node's workers of the tensor are on the
// collectives' device: a tensor whose device is unknown (-1, staged by the client) gets its
// result copied to the host once, as before. Each result is a buffer of its own (the step's
// scratch is reused by the next group): results held over the next steps keep their values; and
// the buffers come from a pool, so steady steps allocate no device memory.
TEST(ExecutorDeviceCollectivesTest, ResultsStayOnTheWorkersDeviceInBuffersOfTheirOwn) {
  for (const double theta : {1.0, 10.0}) {
    SCOPED_TRACE(::testing::Message() << "theta " << theta);
    DeviceJob device({});
    DeviceJob host({.device_collectives = false});
    std::mt19937 rng(17);
    std::vector<DeviceJob::Output> kept_got, kept_want;
    for (int64_t step = 0; step < 4; ++step) {
      std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kAverage);
      tensors[1].device = -1;  // "fc": staged by the client
      const int64_t to_host = device.memory()->to_host;
      DeviceJob::Output got = device.Run(step, theta, 40, tensors, true);
      const int64_t step_to_host = device.memory()->to_host - to_host;
      DeviceJob::Output want = host.Run(step, theta, 40, tensors, true);
      const int64_t headers = theta > 1 ? 2 * 2 * 8 * static_cast<int64_t>(tensors.size()) : 0;
      // "fc"'s result crossed to the host in the step (both nodes), "conv"'s did not.
      EXPECT_EQ(step_to_host, 2 * 4 * static_cast<int64_t>(tensors[1].grads[0].size()) + headers);
      for (int n = 0; n < 2; ++n) {
        EXPECT_NE(got.results[n][0].device_data, nullptr);
        EXPECT_TRUE(got.results[n][0].data.empty());
        EXPECT_EQ(got.results[n][1].device_data, nullptr);
        EXPECT_EQ(got.results[n][1].data.size(), 4 * tensors[1].grads[n].size());
      }
      ExpectSameResults(got, want, tensors);
      if (step < 2) {
        // Held over the next steps (as a worker server holds a result until it wrote it).
        kept_got.push_back(std::move(got));
        kept_want.push_back(std::move(want));
      }
    }
    // Steps 2 and 3 ran while the results of steps 0 and 1 were held: those kept their values.
    for (size_t k = 0; k < kept_got.size(); ++k) {
      for (int n = 0; n < 2; ++n) {
        EXPECT_EQ(HostBytes(kept_got[k].results[n][0]), kept_want[k].results[n][0].data)
            << "held result of step " << k << " node " << n;
      }
    }
    const int64_t allocations = device.memory()->allocations;
    kept_got.clear();
    for (int64_t step = 4; step < 7; ++step) {
      std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kSum);
      tensors[1].device = -1;
      const auto got = device.Run(step, theta, 40, tensors, true);
      for (int n = 0; n < 2; ++n) {
        EXPECT_THAT(got.results[n][0].status, IsOk());
        EXPECT_NE(got.results[n][0].device_data, nullptr);
      }
    }
    // The released results' buffers were taken again: no new device memory but the given sums'
    // (FakeDeviceData::Make: a block per node tensor, 2 tensors on 2 nodes per step).
    EXPECT_EQ(device.memory()->allocations, allocations + 3 * 4);
  }
}

// When no backend can be made for the results' buffers, the device step's results go to the host
// as before (copied once, `data`), with the host path's bits, said once in the log.
TEST(ExecutorDeviceCollectivesTest, WithoutABackendForResultBuffersResultsGoToTheHost) {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* sink = open_memstream(&text, &size);
  ASSERT_NE(sink, nullptr);
  {
    Logger log("gravacd[test]", LogLevel::kInfo, sink);
    DeviceJob device({.log = &log, .backends_before_failing = 1});
    DeviceJob host({.device_collectives = false});
    std::mt19937 rng(23);
    for (int64_t step = 0; step < 3; ++step) {
      const double theta = step == 1 ? 1 : 10;
      const std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kAverage);
      const auto got = device.Run(step, theta, 40, tensors, true);
      for (int n = 0; n < 2; ++n) {
        for (const TensorResult& r : got.results[n]) {
          EXPECT_THAT(r.status, IsOk());
          EXPECT_EQ(r.device_data, nullptr);
          EXPECT_FALSE(r.data.empty());
        }
      }
      ExpectSameResults(got, host.Run(step, theta, 40, tensors, true), tensors);
    }
  }
  std::fclose(sink);
  const std::string lines(text, size);
  std::free(text);
  size_t said = 0;
  for (size_t at = lines.find("results go back to the workers through host memory");
       at != std::string::npos;
       at = lines.find("results go back to the workers through host memory", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 2u) << "once per executor: " << lines;
  EXPECT_THAT(lines, HasSubstr("out of device memory for a backend"));
}

// The first group whose exchange ran over the device collectives is said once per executor (per
// job), naming the collectives and their device (scripts/gpu_check.sh greps for it); a group
// that fell back to the host path, a host-only job and a device exchange that failed say nothing.
TEST(ExecutorDeviceCollectivesTest, TheDeviceStepIsSaidOncePerExecutor) {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* sink = open_memstream(&text, &size);
  ASSERT_NE(sink, nullptr);
  constexpr char kSaid[] = "device step: fake-nccl collectives on CUDA device 0";
  auto count = [&]() {
    std::fflush(sink);
    const std::string lines(text, size);
    int n = 0;
    for (size_t at = lines.find(kSaid); at != std::string::npos; at = lines.find(kSaid, at + 1)) {
      ++n;
    }
    return n;
  };
  {
    Logger log("gravacd[test]", LogLevel::kInfo, sink);
    std::mt19937 rng(31);
    {
      DeviceJob failing({.log = &log});
      for (int n = 0; n < 2; ++n) failing.nccl(n).FailNext(FakeNcclCollectives::Op::kAllreduceSum);
      const auto got = failing.Run(0, 1, 40, Tensors(rng, collectives::ReduceOp::kSum), true);
      for (int n = 0; n < 2; ++n) EXPECT_FALSE(got.run[n].ok());
      EXPECT_EQ(count(), 0) << "a failed device exchange ran no group";
    }
    DeviceJob host({.device_collectives = false, .log = &log});
    DeviceJob device({.log = &log});
    std::vector<StepTensor> mixed = Tensors(rng, collectives::ReduceOp::kSum);
    mixed[1].memory = MemoryType::kHost;
    for (const auto& got : {host.Run(0, 10, 40, Tensors(rng, collectives::ReduceOp::kSum), true),
                            device.Run(0, 10, 40, mixed, true)}) {
      for (int n = 0; n < 2; ++n) EXPECT_THAT(got.run[n], IsOk());
    }
    EXPECT_EQ(count(), 0) << "host-path groups only";
    for (int64_t step = 1; step < 5; ++step) {
      const auto got = device.Run(step, step % 2 == 0 ? 1 : 10, 40,
                                  Tensors(rng, collectives::ReduceOp::kAverage), true);
      for (int n = 0; n < 2; ++n) EXPECT_THAT(got.run[n], IsOk());
      EXPECT_EQ(count(), 2) << "once per executor, step " << step;
    }
  }
  std::fclose(sink);
  const std::string lines(text, size);
  std::free(text);
  EXPECT_THAT(lines, HasSubstr(absl::StrCat(kSaid, " (first group: sparse_allgather")));
  EXPECT_THAT(lines, ::testing::Not(HasSubstr("first group: dense_allreduce")));
}

// A non-finite gradient on node 1 fails that tensor on both nodes with the host path's error
// (sparse: node 1's error block reaches node 0); the other tensor and the next step are fine.
// Dense: the NaN is summed into both nodes' results, as on the host path.
TEST(ExecutorDeviceCollectivesTest, NonFiniteGradientFailsTheTensorOnBothNodes) {
  DeviceJob device({});
  DeviceJob host({.device_collectives = false});
  std::mt19937 rng(4);
  const std::vector<StepTensor> first = Tensors(rng, collectives::ReduceOp::kAverage);
  ExpectSameResults(device.Run(0, 10, 40, first, true), host.Run(0, 10, 40, first, true), first);
  const std::vector<float> kept = device.executor(1).Residual("fc");
  std::vector<StepTensor> bad = Tensors(rng, collectives::ReduceOp::kAverage);
  bad[1].grads[1][17] = std::numeric_limits<float>::quiet_NaN();
  for (const double theta : {10.0, 40.0, 25.0, 1.0}) {
    SCOPED_TRACE(::testing::Message() << "theta " << theta);
    const int gathers = device.nccl(0).allgatherv, reduces = device.nccl(0).allreduce_sum;
    const auto got = device.Run(1, theta, 40, bad, true);
    const auto want = host.Run(1, theta, 40, bad, true);
    ExpectSameResults(got, want, bad);
    EXPECT_EQ(device.nccl(0).allgatherv + device.nccl(0).allreduce_sum, gathers + reduces + 1);
    for (int n = 0; n < 2; ++n) {
      EXPECT_THAT(got.results[n][0].status, IsOk());
      if (theta > 1) {
        EXPECT_THAT(got.results[n][1].status,
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             ::testing::AllOf(HasSubstr("'fc'"), HasSubstr("index 17"),
                                              HasSubstr("ranks "))));
      } else {
        EXPECT_THAT(got.results[n][1].status, IsOk());
        EXPECT_TRUE(std::isnan(Values<float>(HostBytes(got.results[n][1]))[17]));
      }
    }
    EXPECT_EQ(device.executor(1).Residual("fc"), kept);
  }
  const std::vector<StepTensor> next = Tensors(rng, collectives::ReduceOp::kAverage);
  const auto got = device.Run(2, 10, 40, next, true);
  ExpectSameResults(got, host.Run(2, 10, 40, next, true), next);
  for (int n = 0; n < 2; ++n) EXPECT_THAT(got.results[n][1].status, IsOk());
}

// A block that does not parse (here: rank 1's first header claims more elements than the tensor
// has) fails every tensor whose message it would carry, on every node, naming the node; the run
// itself goes on.
TEST(ExecutorDeviceCollectivesTest, AMalformedBlockFailsItsTensorsOnEveryNode) {
  DeviceJob device({});
  std::mt19937 rng(6);
  for (int n = 0; n < 2; ++n) device.nccl(n).corrupt_rank_1_header = true;
  const auto got = device.Run(0, 10, 40, Tensors(rng, collectives::ReduceOp::kSum), true);
  for (int n = 0; n < 2; ++n) {
    EXPECT_THAT(got.run[n], IsOk());
    for (const TensorResult& r : got.results[n]) {
      EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("truncated or malformed device exchange block")));
    }
    EXPECT_THAT(got.results[n][0].status,
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'conv': ranks ")));
  }
  for (int n = 0; n < 2; ++n) device.nccl(n).corrupt_rank_1_header = false;
  const auto next = device.Run(1, 10, 40, Tensors(rng, collectives::ReduceOp::kSum), true);
  for (int n = 0; n < 2; ++n) {
    for (const TensorResult& r : next.results[n]) EXPECT_THAT(r.status, IsOk());
  }
}

// A sum that fails while it is built in its result buffer (a ScatterAdd that cannot run, on one
// node) fails that tensor on that node naming the device, and the backend is synchronised before
// the buffer goes back to the pool (work queued on it, the Zero, must end before it is reused);
// the next step runs as usual on both nodes.
TEST(ExecutorDeviceCollectivesTest,
     AFailedSumInItsResultBufferSynchronisesBeforeTheBufferIsReused) {
  DeviceJob device({});
  std::mt19937 rng(8);
  std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kSum);
  tensors.resize(1);  // "conv" alone: no other result of the group synchronises the backend
  device.memory()->fail_scatter_add = 1;
  const auto got = device.Run(0, 10, 40, tensors, true);
  EXPECT_GE(device.memory()->synchronized_after_failure, 1);
  int failed = 0;
  for (int n = 0; n < 2; ++n) {
    EXPECT_THAT(got.run[n], IsOk());
    const TensorResult& r = got.results[n][0];
    if (r.status.ok()) {
      EXPECT_NE(r.device_data, nullptr);
      continue;
    }
    ++failed;
    EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kInternal,
                                   AllOf(HasSubstr("tensor 'conv': the sum on CUDA device 0"),
                                         HasSubstr("ScatterAdd failed (injected)"))));
    EXPECT_EQ(r.device_data, nullptr);
    EXPECT_TRUE(r.data.empty());
  }
  EXPECT_EQ(failed, 1);
  tensors = Tensors(rng, collectives::ReduceOp::kSum);
  tensors.resize(1);
  const auto next = device.Run(1, 10, 40, tensors, true);
  for (int n = 0; n < 2; ++n) {
    EXPECT_THAT(next.run[n], IsOk());
    EXPECT_THAT(next.results[n][0].status, IsOk());
  }
  EXPECT_EQ(HostBytes(next.results[0][0]), HostBytes(next.results[1][0]));
}

// Groups the device step does not carry run on the host data plane with the host path's results,
// and the device collectives are not called: a group with a tensor in host memory, a process
// set's group, a sparse step of a compressor the backends do not run. The fallback is said once
// per reason in the log.
TEST(ExecutorDeviceCollectivesTest, GroupsItCannotCarryFallBackToTheHostPath) {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* sink = open_memstream(&text, &size);
  ASSERT_NE(sink, nullptr);
  {
    Logger log("gravacd[test]", LogLevel::kInfo, sink);
    struct Case {
      const char* what;
      JobOptions job;
      std::vector<int> process_set;
      bool mixed;
      double theta;
    };
    const Case cases[] = {
        {"mixed", {.log = &log}, {}, true, 10},
        {"mixed dense", {.log = &log}, {}, true, 1},
        {"process set", {.ranks_per_node = 2, .log = &log}, {0, 2}, false, 10},
        {"process set dense", {.ranks_per_node = 2, .log = &log}, {0, 2}, false, 1},
        {"randomk sparse", {.compressor = "randomk", .log = &log}, {}, false, 10},
    };
    std::mt19937 rng(9);
    for (const Case& c : cases) {
      SCOPED_TRACE(c.what);
      JobOptions host_options = c.job;
      host_options.device_collectives = false;
      host_options.log = nullptr;
      DeviceJob device(c.job);
      DeviceJob host(host_options);
      for (int64_t step = 0; step < 2; ++step) {
        std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kAverage);
        if (c.mixed) tensors[1].memory = MemoryType::kHost;
        for (StepTensor& t : tensors) t.process_set = c.process_set;
        const int64_t host_messages = device.HostMessages();
        const auto got = device.Run(step, c.theta, 40, tensors, true);
        ExpectSameResults(got, host.Run(step, c.theta, 40, tensors, true), tensors);
        EXPECT_GT(device.HostMessages(), host_messages);
        for (int n = 0; n < 2; ++n) EXPECT_EQ(device.nccl(n).calls(), 0);
      }
    }
  }
  std::fclose(sink);
  const std::string lines(text, size);
  std::free(text);
  auto count = [&lines](std::string_view what) {
    int n = 0;
    for (size_t at = lines.find(what); at != std::string::npos; at = lines.find(what, at + 1)) ++n;
    return n;
  };
  // Once per executor and reason, however many groups fell back: two jobs (sparse and dense) of
  // two executors, two steps each, for the mixed groups and the process sets; one job for randomk.
  EXPECT_EQ(count("groups with tensors in host memory run over the host data plane"), 4) << lines;
  EXPECT_EQ(count("process sets' groups run over the host data plane"), 4) << lines;
  EXPECT_EQ(count("sparse groups of the 'randomk' compressor"), 2) << lines;
}

// Dense steps of tensors that are not on the device backend run on the device too: randomk's p
// (the CPU compressor path, host memory) and an uncompressed job's g (no compression backend:
// the Executor's own device backend) are staged into device memory; the results are the host
// path's.
TEST(ExecutorDeviceCollectivesTest, DenseStepsStageWhatIsNotOnTheDevice) {
  for (const char* compressor : {"randomk", ""}) {
    SCOPED_TRACE(compressor);
    for (const bool device_sums : {false, true}) {
      DeviceJob device({.compressor = compressor});
      DeviceJob host({.compressor = compressor, .device_collectives = false});
      std::mt19937 rng(13);
      for (int64_t step = 0; step < 3; ++step) {
        const std::vector<StepTensor> tensors = Tensors(rng, collectives::ReduceOp::kAverage);
        const int64_t host_messages = device.HostMessages();
        const auto got = device.Run(step, 1, 40, tensors, device_sums);
        ExpectSameResults(got, host.Run(step, 1, 40, tensors, device_sums), tensors);
        EXPECT_EQ(device.HostMessages(), host_messages);
        EXPECT_EQ(device.nccl(0).allreduce_sum, step + 1);
      }
      if (*compressor != '\0') {
        EXPECT_EQ(device.executor(0).Residual("conv"), host.executor(0).Residual("conv"));
      }
    }
  }
}

// A failure of the device collectives (a peer lost) is returned by Run, fatal for the engine, as
// the Communicator's is on the host path.
TEST(ExecutorDeviceCollectivesTest, ACollectivesFailureIsReturned) {
  struct Case {
    double theta;
    FakeNcclCollectives::Op op;
  };
  for (const Case c :
       {Case{1, FakeNcclCollectives::Op::kAllreduceSum}, Case{1, FakeNcclCollectives::Op::kWait},
        Case{10, FakeNcclCollectives::Op::kAgreeSizes},
        Case{10, FakeNcclCollectives::Op::kAllgatherv}, Case{10, FakeNcclCollectives::Op::kWait}}) {
    SCOPED_TRACE(::testing::Message() << "theta " << c.theta << " op " << static_cast<int>(c.op));
    DeviceJob device({});
    std::mt19937 rng(3);
    for (int n = 0; n < 2; ++n) device.nccl(n).FailNext(c.op);
    const auto got = device.Run(0, c.theta, 40, Tensors(rng, collectives::ReduceOp::kSum), true);
    for (int n = 0; n < 2; ++n) {
      EXPECT_THAT(got.run[n], StatusIs(absl::StatusCode::kUnavailable, HasSubstr("fake nccl")));
    }
  }
}

}  // namespace
}  // namespace gravac::daemon

// The CUDA IPC handoff end to end without a GPU: libgravac's DeviceHandoff over a fake CUDA
// runtime, a real Client and a real in-process WorkerServer (FakeEngine) whose DeviceAccess is a
// fake that opens the fake handles. Only the CUDA calls are fakes: the worker.proto messages
// (Welcome.device_intake, MapDevice, Request.device_buffer, Response.stage), the mapping cache,
// the fallback to host staging and every refusal are the product's code.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/src/client.h"
#include "client/src/device_handoff.h"
#include "daemon/local/worker_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_device.h"
#include "tests/daemon/local/fake_engine.h"
#include "tests/daemon/local/test_workers.h"

namespace gravac {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing::FakeDeviceAccess;
using testing::FakeDeviceRuntime;

constexpr int kCount = 1000;

class DeviceHandoffTest : public ::testing::Test {
 protected:
  // The daemon's local side for `local_size` workers; `device` may be null (no device intake).
  // `reduce` (may be null): the local reduce in device memory. `nccl_built`: what the Welcome says
  // of gravacd's NCCL device collectives.
  void StartDaemon(int local_size, ipc::DeviceAccess* device,
                   daemon::DeviceReduce* reduce = nullptr, bool nccl_built = false) {
    engine_ = std::make_unique<daemon::testing::FakeEngine>(local_size);
    daemon::WorkerServerOptions o;
    o.socket_path = dir_.socket();
    o.local_size = local_size;
    o.device = device;
    o.device_reduce = reduce;
    o.nccl_built = nccl_built;
    auto server = daemon::WorkerServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Serve(engine_->Sink(), engine_->OnFailure());
  }

  // One worker: a Client and its DeviceHandoff over `runtime`; what it says is kept in `said`.
  struct Worker {
    std::unique_ptr<client::Client> client;
    std::unique_ptr<client::DeviceHandoff> handoff;
    std::vector<std::string> said;
  };
  std::unique_ptr<Worker> Connect(int local_rank, int n, FakeDeviceRuntime* runtime) {
    client::ClientConfig c;
    c.rank = local_rank;
    c.size = n;
    c.local_rank = local_rank;
    c.local_size = n;
    c.daemon_socket = dir_.socket();
    c.connect_timeout = absl::Seconds(5);
    auto connected = client::Client::Connect(c);
    EXPECT_TRUE(connected.ok()) << connected.status();
    if (!connected.ok()) return nullptr;
    auto w = std::make_unique<Worker>();
    w->client = std::move(*connected);
    Worker* raw = w.get();
    w->handoff = std::make_unique<client::DeviceHandoff>(
        w->client.get(), runtime, [raw](const std::string& m) { raw->said.push_back(m); });
    return w;
  }

  static v1::Request Allreduce(const std::string& name) {
    v1::Request r;
    r.set_name(name);
    r.set_kind(v1::ALLREDUCE);
    r.set_dtype(v1::FLOAT32);
    r.add_shape(kCount);
    r.set_reduce_op(v1::SUM);
    r.set_step(-1);
    return r;
  }

  // Posts `name` on in -> out and waits; runs the completion when it succeeded.
  static absl::Status PostAndWait(Worker& w, const std::string& name, const float* in,
                                  float* out, int device = 0) {
    auto post = w.handoff->Allreduce(Allreduce(name), in, out, kCount * sizeof(float), device,
                                     nullptr);
    if (!post.ok()) return post.status();
    absl::Status s = post->state->Wait();
    if (!s.ok()) return s;
    MutexLock lock(&post->state->mu);
    return post->completion->End();
  }

  daemon::testing::TempDir dir_;
  // gravacd's CUDA side; declared before server_, whose mappings it closes when it stops.
  std::unique_ptr<FakeDeviceAccess> access_ = std::make_unique<FakeDeviceAccess>();
  std::unique_ptr<daemon::testing::FakeEngine> engine_;
  std::unique_ptr<daemon::WorkerServer> server_;
};

// Two workers on one node; worker 0 reduces in place, worker 1 from `in` into `out`.
TEST_F(DeviceHandoffTest, DeviceBuffersCrossWithoutHostCopyAndEachAllocationIsMappedOnce) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(2, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> a0(kCount), b1(kCount), out1(kCount);
  runtime.Register(a0.data(), a0.size() * sizeof(float), 0, 100);
  runtime.Register(b1.data(), b1.size() * sizeof(float), 0, 101);
  runtime.Register(out1.data(), out1.size() * sizeof(float), 0, 102);
  std::vector<std::unique_ptr<Worker>> w(2);
  std::vector<std::thread> threads;
  for (int lr = 0; lr < 2; ++lr) {
    threads.emplace_back([&, lr] {
      w[lr] = Connect(lr, 2, &runtime);
      ASSERT_NE(w[lr], nullptr);
      EXPECT_TRUE(w[lr]->client->device_intake());
      for (int step = 0; step < 3; ++step) {
        for (int i = 0; i < kCount; ++i) {
          (lr == 0 ? a0 : b1)[i] = static_cast<float>((i % 7) * (lr + 1) + step);
        }
        absl::Status s = lr == 0 ? PostAndWait(*w[0], "g", a0.data(), a0.data())
                                 : PostAndWait(*w[1], "g", b1.data(), out1.data());
        ASSERT_TRUE(s.ok()) << s;
        const std::vector<float>& got = lr == 0 ? a0 : out1;
        for (int i = 0; i < kCount; ++i) {
          ASSERT_EQ(got[i], static_cast<float>((i % 7) * 3 + 2 * step)) << "element " << i;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int lr = 0; lr < 2; ++lr) {
    EXPECT_EQ(w[lr]->handoff->ipc_posts(), 3);
    EXPECT_EQ(w[lr]->handoff->staged_posts(), 0);
    EXPECT_EQ(w[lr]->handoff->map_requests(), 1) << "one MapDevice per allocation";
    EXPECT_THAT(w[lr]->said, SizeIs(0));
  }
  EXPECT_EQ(access.opens(), 2) << "gravacd opens each allocation once";
  EXPECT_EQ(access.ready_waits(), 6);
  EXPECT_EQ(access.done_records(), 6);
  EXPECT_EQ(runtime.host_copies(), 0) << "no host copy on the worker";
  EXPECT_EQ(runtime.device_copies(), 3) << "in -> out on the stream for worker 1";
  EXPECT_EQ(runtime.records(), 6);
  EXPECT_EQ(runtime.stream_waits(), 6);
  EXPECT_EQ(runtime.events(), 4) << "a pair of events per worker, reused";
  // The engine learns the workers' device: it compresses there (daemon/engine/executor.h).
  EXPECT_THAT(engine_->devices(), ::testing::ElementsAre(0, 0, 0));
  for (const daemon::TensorSpec& s : engine_->specs()) EXPECT_EQ(s.memory, MemoryType::kDevice);
  for (auto& x : w) EXPECT_TRUE(x->client->Shutdown().ok());
}

// With a local reduce in device memory, the workers' fp32 buffers are summed there (after their
// ready events, read in place: no copy to the host on the local side) and the engine gets the
// sum in device memory; where the device cannot be used they are read to the host as before.
// The workers' results are the same either way.
TEST_F(DeviceHandoffTest, TheLocalReduceRunsInDeviceMemoryWhenItCan) {
  for (const bool usable : {true, false}) {
    SCOPED_TRACE(usable ? "device reduce" : "device refused: host reduce");
    testing::FakeDeviceReduce reduce(usable);
    StartDaemon(2, access_.get(), &reduce);
    FakeDeviceRuntime runtime;
    std::vector<float> a(kCount), b(kCount);
    runtime.Register(a.data(), a.size() * sizeof(float), 0, 200);
    runtime.Register(b.data(), b.size() * sizeof(float), 0, 201);
    std::vector<std::unique_ptr<Worker>> w(2);
    std::vector<std::thread> threads;
    for (int lr = 0; lr < 2; ++lr) {
      threads.emplace_back([&, lr] {
        w[lr] = Connect(lr, 2, &runtime);
        ASSERT_NE(w[lr], nullptr);
        std::vector<float>& x = lr == 0 ? a : b;
        for (int step = 0; step < 2; ++step) {
          for (int i = 0; i < kCount; ++i) x[i] = static_cast<float>(i % 5) * (lr + 1) - step;
          ASSERT_TRUE(PostAndWait(*w[lr], "g", x.data(), x.data()).ok());
          for (int i = 0; i < kCount; ++i) {
            ASSERT_EQ(x[i], static_cast<float>(i % 5) * 3 - 2 * step) << "element " << i;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(reduce.sums(), usable ? 2 : 0);
    EXPECT_EQ(engine_->device_sums(), usable ? 2 : 0);
    EXPECT_THAT(engine_->devices(), ::testing::ElementsAre(0, 0));
    for (auto& x : w) EXPECT_TRUE(x->client->Shutdown().ok());
    server_.reset();
  }
  EXPECT_EQ(access_->ready_waits(), 8) << "every post's ready event, on both paths";
}

// A result the engine hands back in device memory of the workers' device (its device step,
// TensorResult::device_data) is written into each mapped buffer device to device
// (DeviceAccess::WriteFromDevice), never through host memory; a worker of the same tensor that
// staged through host memory (here: its runtime cannot export) gets it by one copy to the host
// (ResultHostData). Every worker sees the sum.
TEST_F(DeviceHandoffTest, AResultInDeviceMemoryIsWrittenDeviceToDevice) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(2, &access);
  engine_->set_device_results(true);
  FakeDeviceRuntime runtime, staging;
  staging.FailExports();
  std::vector<float> a(kCount), b(kCount);
  runtime.Register(a.data(), a.size() * sizeof(float), 0, 300);
  staging.Register(b.data(), b.size() * sizeof(float), 0, 301);
  std::vector<std::unique_ptr<Worker>> w(2);
  std::vector<std::thread> threads;
  constexpr int kSteps = 3;
  for (int lr = 0; lr < 2; ++lr) {
    threads.emplace_back([&, lr] {
      w[lr] = Connect(lr, 2, lr == 0 ? &runtime : &staging);
      ASSERT_NE(w[lr], nullptr);
      std::vector<float>& x = lr == 0 ? a : b;
      for (int step = 0; step < kSteps; ++step) {
        for (int i = 0; i < kCount; ++i) x[i] = static_cast<float>(i % 9) * (lr + 1) + step;
        absl::Status s = PostAndWait(*w[lr], "g", x.data(), x.data());
        ASSERT_TRUE(s.ok()) << s;
        for (int i = 0; i < kCount; ++i) {
          ASSERT_EQ(x[i], static_cast<float>(i % 9) * 3 + 2 * step) << "element " << i;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(w[0]->handoff->ipc_posts(), kSteps);
  EXPECT_EQ(w[1]->handoff->staged_posts(), kSteps);
  EXPECT_EQ(engine_->device_results(), kSteps);
  EXPECT_EQ(access.device_writes(), kSteps) << "rank 0's buffer, device to device";
  EXPECT_EQ(access.host_writes(), 0) << "no result written from host memory";
  EXPECT_EQ(access.done_records(), kSteps);
  EXPECT_EQ(engine_->result_host_copies(), kSteps) << "one copy per result, for rank 1 alone";
  for (auto& x : w) EXPECT_TRUE(x->client->Shutdown().ok());
}

// A device-to-device write of a result that fails fails the tensor on that rank, naming rank,
// tensor and field, with the CUDA error; the worker is answered (no hang) and goes on.
TEST_F(DeviceHandoffTest, AFailedDeviceToDeviceWriteFailsTheTensorOnThatRank) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(1, &access);
  engine_->set_device_results(true);
  FakeDeviceRuntime runtime;
  std::vector<float> buf(kCount, 2.0f);
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 400);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  access.FailDeviceWrites(
      absl::InternalError("cudaMemcpyAsync failed: cudaErrorIllegalAddress (fake)"));
  absl::Status s = PostAndWait(*w, "g", buf.data(), buf.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 0, tensor 'g', field device_buffer: writing the result "
                                     "from CUDA device 0 memory failed"));
  EXPECT_THAT(s.message(), HasSubstr("cudaErrorIllegalAddress"));
  EXPECT_EQ(access.host_writes(), 0) << "no silent fallback through host memory";
  access.FailDeviceWrites(absl::OkStatus());
  for (int i = 0; i < kCount; ++i) buf[i] = static_cast<float>(i);
  s = PostAndWait(*w, "g", buf.data(), buf.data());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(buf[5], 5.0f);
  EXPECT_EQ(access.device_writes(), 2);
  EXPECT_TRUE(w->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, AFreedBlockReusedAtTheSameAddressIsMappedAgain) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(1, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> buf(kCount, 1.0f);
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 7);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  EXPECT_EQ(w->handoff->map_requests(), 1);
  // The caching allocator freed the block and handed the address out again: a new buffer id.
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 8);
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  EXPECT_EQ(w->handoff->map_requests(), 2);
  EXPECT_EQ(access.opens(), 2);
  EXPECT_EQ(access.closes(), 1) << "the freed block's mapping is closed";
  EXPECT_EQ(w->handoff->ipc_posts(), 3);
  EXPECT_TRUE(w->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, AHandleGravacdCannotOpenFallsBackToHostStagingSaidOnce) {
  FakeDeviceAccess& access = *access_;
  access.FailOpens(absl::FailedPreconditionError(
      "cudaIpcOpenMemHandle failed: cudaErrorMapBufferObjectFailed (fake)"));
  StartDaemon(1, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> buf(kCount);
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 1);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->client->device_intake());
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < kCount; ++i) buf[i] = static_cast<float>(i + step);
    absl::Status s = PostAndWait(*w, "g", buf.data(), buf.data());
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 0; i < kCount; ++i) ASSERT_EQ(buf[i], static_cast<float>(i + step));
  }
  EXPECT_EQ(w->handoff->staged_posts(), 2);
  EXPECT_EQ(w->handoff->ipc_posts(), 0);
  EXPECT_EQ(w->handoff->map_requests(), 1) << "the allocation's answer is remembered";
  EXPECT_EQ(runtime.host_copies(), 4);
  EXPECT_THAT(engine_->devices(), ::testing::ElementsAre(-1, -1)) << "staged: no device known";
  ASSERT_THAT(w->said, SizeIs(1));
  EXPECT_THAT(w->said[0], HasSubstr("rank 0: "));
  EXPECT_THAT(w->said[0], HasSubstr("cudaErrorMapBufferObjectFailed"));
  EXPECT_THAT(w->said[0], HasSubstr("staged through host memory"));
  EXPECT_TRUE(w->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, ABufferCudaCannotExportIsStagedSaidOnce) {
  StartDaemon(1, access_.get());
  FakeDeviceRuntime runtime;
  runtime.FailExports();
  std::vector<float> buf(kCount, 5.0f);
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 1);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  EXPECT_EQ(buf[3], 5.0f);
  EXPECT_EQ(w->handoff->staged_posts(), 2);
  EXPECT_EQ(w->handoff->map_requests(), 0);
  ASSERT_THAT(w->said, SizeIs(1));
  EXPECT_THAT(w->said[0], HasSubstr("tensor 'g', field out: cannot be exported by CUDA IPC"));
  EXPECT_TRUE(w->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, AGravacdWithoutCudaIsToldInTheWelcomeAndTheWorkerStages) {
  access_ = std::make_unique<FakeDeviceAccess>(/*available=*/false);
  FakeDeviceAccess& unavailable = *access_;
  StartDaemon(1, &unavailable);
  FakeDeviceRuntime runtime;
  std::vector<float> buf(kCount, 2.0f);
  runtime.Register(buf.data(), buf.size() * sizeof(float), 0, 1);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->client->device_intake());
  EXPECT_FALSE(w->client->nccl_built());
  ASSERT_TRUE(PostAndWait(*w, "g", buf.data(), buf.data()).ok());
  ASSERT_TRUE(PostAndWait(*w, "h", buf.data(), buf.data()).ok());
  EXPECT_EQ(buf[5], 2.0f);
  EXPECT_EQ(w->handoff->staged_posts(), 2);
  EXPECT_EQ(w->handoff->map_requests(), 0);
  EXPECT_EQ(unavailable.opens(), 0);
  ASSERT_THAT(w->said, SizeIs(1));
  EXPECT_THAT(w->said[0], HasSubstr("maps no CUDA IPC handles"));
  EXPECT_TRUE(w->client->Shutdown().ok());
}

// A gravacd built with NCCL device collectives says so in its Welcome (gravac.torch's
// hvd.nccl_built(); the AGravacdWithoutCuda case above gets false).
TEST_F(DeviceHandoffTest, TheWelcomeSaysWhetherGravacdWasBuiltWithNccl) {
  access_ = std::make_unique<FakeDeviceAccess>(/*available=*/true);
  StartDaemon(1, access_.get(), nullptr, /*nccl_built=*/true);
  FakeDeviceRuntime runtime;
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->client->nccl_built());
  EXPECT_TRUE(w->client->device_intake());
  EXPECT_TRUE(w->client->Shutdown().ok());
}

// A request naming a handle gravacd cannot open (freed, or another process's) fails on every
// rank naming the rank, tensor and field; the server goes on serving.
TEST_F(DeviceHandoffTest, AFreedOrForeignHandleFailsOnEveryRankAndTheDaemonGoesOn) {
  FakeDeviceAccess& access = *access_;
  access.RefuseId(666);
  StartDaemon(2, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> good(kCount, 1.0f), bad(kCount, 1.0f);
  runtime.Register(good.data(), good.size() * sizeof(float), 0, 1);
  runtime.Register(bad.data(), bad.size() * sizeof(float), 0, 666);
  auto w0 = Connect(0, 2, &runtime);
  auto w1 = Connect(1, 2, &runtime);
  ASSERT_NE(w0, nullptr);
  ASSERT_NE(w1, nullptr);
  // Rank 0 posts the foreign handle straight away (no MapDevice), as a buggy or hostile worker
  // could; rank 1 posts a good buffer.
  auto e = runtime.Export(bad.data(), kCount * sizeof(float), 0);
  ASSERT_TRUE(e.ok());
  v1::Request r = Allreduce("g");
  r.set_memory(v1::DEVICE_MEMORY);
  r.set_bytes(kCount * sizeof(float));
  v1::DeviceBuffer* b = r.mutable_device_buffer();
  b->set_mem_handle(std::string(reinterpret_cast<const char*>(e->mem_handle), 64));
  b->set_base_address(e->base_address);
  b->set_allocation_bytes(e->allocation_bytes);
  b->set_bytes(e->bytes);
  b->set_buffer_id(e->buffer_id);
  b->set_device(0);
  b->set_done_event(std::string(64, 'd'));
  auto foreign = w0->client->SubmitDevice(r);
  ASSERT_TRUE(foreign.ok());
  absl::Status s1 = PostAndWait(*w1, "g", good.data(), good.data());
  absl::Status s0 = (*foreign)->Wait();
  for (const absl::Status& s : {s0, s1}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("rank 0, tensor 'g', field device_buffer"));
    EXPECT_THAT(s.message(), HasSubstr("freed or foreign CUDA IPC handle"));
  }
  // Both go on with the next tensor.
  std::thread t([&] { EXPECT_TRUE(PostAndWait(*w0, "h", good.data(), good.data()).ok()); });
  std::vector<float> other(kCount, 3.0f);
  runtime.Register(other.data(), other.size() * sizeof(float), 0, 2);
  EXPECT_TRUE(PostAndWait(*w1, "h", other.data(), other.data()).ok());
  t.join();
  EXPECT_EQ(other[0], 4.0f);
  EXPECT_TRUE(w0->client->Shutdown().ok());
  EXPECT_TRUE(w1->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, HostMemoryDeclaredAsDeviceAndTheReverseAreRefusedNamingTheField) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(1, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> host(kCount), dev(kCount);
  runtime.Register(dev.data(), dev.size() * sizeof(float), 0, 1);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  // Before any CUDA tensor, host calls make no CUDA call at all.
  EXPECT_TRUE(w->handoff->CheckHost("g", "out", dev.data()).ok());
  absl::Status s = PostAndWait(*w, "g", host.data(), dev.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 0, tensor 'g', field in: "));
  EXPECT_THAT(s.message(), HasSubstr("is host memory but was declared as memory of CUDA device 0"));
  s = w->handoff->CheckHost("g", "out", dev.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 0, tensor 'g', field out: "));
  EXPECT_THAT(s.message(), HasSubstr("is memory of CUDA device 0 but was posted as host memory"));
  EXPECT_TRUE(w->handoff->CheckHost("g", "in", host.data()).ok());
  EXPECT_EQ(access.opens(), 0) << "refused before anything was posted";
  EXPECT_TRUE(w->client->Shutdown().ok());
}

TEST_F(DeviceHandoffTest, ATensorOnAnotherDeviceThanTheWorkersIsRefused) {
  FakeDeviceAccess& access = *access_;
  StartDaemon(1, &access);
  FakeDeviceRuntime runtime;
  std::vector<float> on0(kCount, 1.0f), on1(kCount, 1.0f);
  runtime.Register(on0.data(), on0.size() * sizeof(float), 0, 1);
  runtime.Register(on1.data(), on1.size() * sizeof(float), 1, 2);
  auto w = Connect(0, 1, &runtime);
  ASSERT_NE(w, nullptr);
  // Declared on device 0, lives on device 1: libgravac refuses it.
  absl::Status s = PostAndWait(*w, "g", on1.data(), on1.data(), /*device=*/0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("field in: "));
  EXPECT_THAT(s.message(), HasSubstr("is memory of CUDA device 1, not of the declared device 0"));
  // Declared right, but the worker's earlier tensors were on device 0: gravacd refuses it.
  ASSERT_TRUE(PostAndWait(*w, "g", on0.data(), on0.data(), 0).ok());
  s = PostAndWait(*w, "h", on1.data(), on1.data(), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 0, tensor 'h', field device: CUDA device 1, but this "
                                     "worker's earlier tensors are on device 0"));
  ASSERT_TRUE(PostAndWait(*w, "g", on0.data(), on0.data(), 0).ok()) << "the worker goes on";
  EXPECT_TRUE(w->client->Shutdown().ok());
}

}  // namespace
}  // namespace gravac

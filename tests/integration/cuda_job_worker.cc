// gravac-cuda-job-worker: one worker of a real gravacrun job on CUDA tensors, through the C API
// only (gravac_allreduce_device_async). Each rank holds a parameter vector on its GPU (device
// local_rank % device count), and for --steps steps makes a deterministic gradient of its own on
// the device, averages it with compress = 1 (the daemons apply the job's θ with error feedback)
// and applies it on the device. Step 0 is sent dense and checked exactly. At the end every rank
// allgathers a checksum of its parameters: the replicas must be identical. Prints one line
// "cuda_job rank R: ok steps S theta_last T checksum C" and exits 0, else names the failure and
// exits 1. Exit 77 when no CUDA device is usable.
//
//   gravacrun -np 2 -- gravac-cuda-job-worker [--steps 20] [--count 4194304]
#include <cuda_runtime_api.h>
#include <gravac/gravac.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "cuda_job rank %d: FAILED: %s\n", rank, what.c_str());
  return 1;
}

uint64_t Checksum(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 20;
  int64_t count = int64_t{1} << 22;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--steps") steps = std::atoll(argv[i + 1]);
    if (a == "--count") count = std::atoll(argv[i + 1]);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cuda_job: skipped, no usable CUDA device\n");
    return 77;
  }
  gravac_context* ctx = nullptr;
  char error[512] = {};
  if (gravac_init_verbose(&ctx, error, sizeof(error)) != GRAVAC_OK) return Fail(-1, error);
  const int rank = gravac_rank(ctx);
  const int size = gravac_size(ctx);
  const int device = gravac_local_rank(ctx) % devices;
  if (cudaSetDevice(device) != cudaSuccess) return Fail(rank, "cudaSetDevice");
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return Fail(rank, "cudaStreamCreate");
  }
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  std::vector<float> params(count, 0.0f), grad(count);
  void* d_grad = nullptr;
  void* d_avg = nullptr;
  if (cudaMalloc(&d_grad, bytes) != cudaSuccess || cudaMalloc(&d_avg, bytes) != cudaSuccess) {
    return Fail(rank, "cudaMalloc");
  }
  const int64_t shape[] = {count};
  gravac_device dev{device, stream};
  double theta = 1;
  for (int64_t step = 0; step < steps; ++step) {
    // A gradient of this rank: smooth in i, different per rank and step.
    for (int64_t i = 0; i < count; ++i) {
      grad[i] = std::sin(0.001f * static_cast<float>(i) * static_cast<float>(rank + 1) +
                         static_cast<float>(step)) *
                (1.0f + 0.01f * static_cast<float>(i % 97));
    }
    if (cudaMemcpyAsync(d_grad, grad.data(), bytes, cudaMemcpyHostToDevice, stream) !=
        cudaSuccess) {
      return Fail(rank, "copy of the gradient to the device");
    }
    gravac_tensor_options options{step, 32, step == 0 ? 0 : 1};
    gravac_request* req = nullptr;
    if (gravac_allreduce_device_async(ctx, "grad", d_grad, d_avg, shape, 1, GRAVAC_FLOAT32,
                                      GRAVAC_AVERAGE, &options, &dev, &req) != GRAVAC_OK) {
      return Fail(rank, gravac_last_error(ctx));
    }
    if (gravac_wait(req) != GRAVAC_OK) return Fail(rank, gravac_request_error(req));
    gravac_result_info info{};
    if (gravac_result_info_get(req, &info) == GRAVAC_OK) theta = info.theta;
    gravac_request_free(req);
    std::vector<float> avg(count);
    if (cudaMemcpyAsync(avg.data(), d_avg, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return Fail(rank, "copy of the average to the host");
    }
    if (step == 0) {  // dense: the exact average of every rank's gradient
      for (int64_t i = 0; i < count; i += 4099) {
        double expect = 0;
        for (int r = 0; r < size; ++r) {
          expect += std::sin(0.001f * static_cast<float>(i) * static_cast<float>(r + 1)) *
                    (1.0f + 0.01f * static_cast<float>(i % 97));
        }
        expect /= size;
        if (std::fabs(avg[i] - expect) > 1e-5 * (1 + std::fabs(expect))) {
          return Fail(rank, "dense step 0: element " + std::to_string(i) + " is " +
                                std::to_string(avg[i]) + ", expected " + std::to_string(expect));
        }
      }
    }
    for (int64_t i = 0; i < count; ++i) params[i] -= 0.01f * avg[i];
  }
  const uint64_t mine = Checksum(params);
  const int64_t one[] = {1};
  gravac_request* req = nullptr;
  if (gravac_allgather_async(ctx, "checksum", &mine, one, 1, GRAVAC_INT64, &req) != GRAVAC_OK ||
      gravac_wait(req) != GRAVAC_OK) {
    return Fail(rank, "checksum allgather");
  }
  std::vector<uint64_t> all(size);
  int64_t first_dim = 0;
  if (gravac_allgather_result(req, &first_dim, all.data(), all.size() * sizeof(uint64_t)) !=
      GRAVAC_OK) {
    return Fail(rank, "checksum allgather result");
  }
  gravac_request_free(req);
  for (int r = 0; r < size; ++r) {
    if (all[r] != mine) return Fail(rank, "replica of rank " + std::to_string(r) + " differs");
  }
  std::printf("cuda_job rank %d: ok steps %lld theta_last %g checksum %016llx\n", rank,
              static_cast<long long>(steps), theta, static_cast<unsigned long long>(mine));
  cudaFree(d_grad);
  cudaFree(d_avg);
  gravac_shutdown(ctx);
  return 0;
}

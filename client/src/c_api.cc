// The C API of gravac.h over client::Client.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/src/client.h"
#include "client/src/device_handoff.h"
#include "client/src/device_runtime.h"
#include "client/src/regroup.h"
#include "core/ipc/cuda_ipc.h"
#include "core/mutex.h"
#include "core/status.h"
#include "gravac/gravac.h"

struct gravac_context {
  std::unique_ptr<gravac::client::Client> client;
  gravac::Mutex error_mu;
  std::string last_error ABSL_GUARDED_BY(error_mu);
  // CUDA tensors (gravac_allreduce_device_async): made on first use.
  gravac::client::CudaDeviceRuntime runtime;
  std::once_flag device_made;
  std::unique_ptr<gravac::client::DeviceHandoff> device;
};

struct gravac_request {
  std::shared_ptr<gravac::client::RequestState> state;
  // Device tensors: orders the caller's stream after the result, run once when the request is
  // seen done (DeviceHandoff).
  std::unique_ptr<gravac::client::DeviceCompletion> device;
};

// Owns the mapping of its memory; the registry is gone once the client is.
struct gravac_buffer {
  gravac::client::SharedBuffers::Buffer buffer;
  std::weak_ptr<gravac::client::SharedBuffers> registry;
};

namespace {

using gravac::client::Client;
using gravac::client::ClientConfig;
using gravac::client::RequestState;
namespace v1 = gravac::v1;

gravac_status FromStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return GRAVAC_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return GRAVAC_ERR_INVALID;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
      return GRAVAC_ERR_UNAVAILABLE;
    case absl::StatusCode::kDeadlineExceeded:
      return GRAVAC_ERR_TIMEOUT;
    case absl::StatusCode::kFailedPrecondition:
      return GRAVAC_ERR_MISMATCH;
    case absl::StatusCode::kCancelled:
      return GRAVAC_ERR_SHUTDOWN;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAlreadyExists:
      return GRAVAC_ERR_REFUSED;
    default:
      return GRAVAC_ERR_INTERNAL;
  }
}

gravac_status Fail(const gravac_context* ctx, const absl::Status& s) {
  if (ctx != nullptr) {
    auto* mut = const_cast<gravac_context*>(ctx);
    gravac::MutexLock lock(&mut->error_mu);
    mut->last_error = std::string(s.message());
  }
  return FromStatus(s);
}

void CopyError(const absl::Status& s, char* buf, size_t size) {
  if (buf == nullptr || size == 0) return;
  const std::string m(s.message());
  const size_t n = std::min(size - 1, m.size());
  std::memcpy(buf, m.data(), n);
  buf[n] = '\0';
}

gravac_status Init(const absl::StatusOr<ClientConfig>& config, gravac_context** ctx, char* error,
                   size_t error_size) {
  if (ctx == nullptr) {
    CopyError(absl::InvalidArgumentError("ctx is NULL"), error, error_size);
    return GRAVAC_ERR_INVALID;
  }
  *ctx = nullptr;
  if (!config.ok()) {
    CopyError(config.status(), error, error_size);
    return FromStatus(config.status());
  }
  auto client = Client::Connect(*config);
  if (!client.ok()) {
    CopyError(client.status(), error, error_size);
    return FromStatus(client.status());
  }
  auto* c = new gravac_context;
  c->client = std::move(*client);
  *ctx = c;
  return GRAVAC_OK;
}

absl::StatusOr<v1::DataType> ProtoDtype(gravac_dtype dtype) {
  switch (dtype) {
    case GRAVAC_FLOAT32:
      return v1::FLOAT32;
    case GRAVAC_FLOAT64:
      return v1::FLOAT64;
    case GRAVAC_FLOAT16:
      return v1::FLOAT16;
    case GRAVAC_BFLOAT16:
      return v1::BFLOAT16;
    case GRAVAC_INT32:
      return v1::INT32;
    case GRAVAC_INT64:
      return v1::INT64;
    case GRAVAC_UINT8:
      return v1::UINT8;
  }
  return absl::InvalidArgumentError(absl::StrFormat("unknown dtype %d", static_cast<int>(dtype)));
}

// Validates the common arguments and fills name, dtype, shape; returns the tensor's bytes.
absl::StatusOr<uint64_t> Prepare(const gravac_context* ctx, const char* name, const int64_t* shape,
                                 int ndim, gravac_dtype dtype, gravac_request** req,
                                 v1::Request* r) {
  if (ctx == nullptr) return absl::InvalidArgumentError("context is NULL");
  if (req == nullptr) return absl::InvalidArgumentError("req is NULL");
  if (name == nullptr || name[0] == '\0') return absl::InvalidArgumentError("empty tensor name");
  const int rank = ctx->client->config().rank;
  if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d, tensor '%s': bad shape (ndim %d)", rank, name, ndim));
  }
  auto pd = ProtoDtype(dtype);
  if (!pd.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d, tensor '%s': %s", rank, name, pd.status().message()));
  }
  uint64_t elements = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rank %d, tensor '%s': negative dimension %d", rank, name, shape[i]));
    }
    elements *= static_cast<uint64_t>(shape[i]);
    r->add_shape(shape[i]);
  }
  r->set_name(name);
  r->set_dtype(*pd);
  r->set_step(-1);
  return elements * gravac_dtype_size(dtype);
}

// Copies a process set into the request (the daemon checks it against the job).
absl::Status SetProcessSet(const gravac_context* ctx, const char* name,
                           const gravac_process_set* set, v1::Request* r) {
  if (set == nullptr || set->size == 0) return absl::OkStatus();
  if (set->size < 0 || set->ranks == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d, tensor '%s': process_set of size %d with ranks %s",
                        ctx->client->config().rank, name, set->size,
                        set->ranks == nullptr ? "NULL" : "given"));
  }
  for (int i = 0; i < set->size; ++i) r->add_process_set(set->ranks[i]);
  return absl::OkStatus();
}

// A completed device request (s: its state, locked): copies the result to the caller's device
// buffer once. A failed copy becomes the request's error.
void FinishDevice(gravac_request* req, RequestState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  if (req->device == nullptr) return;
  if (s.status.ok()) {
    absl::Status copied = req->device->End();
    if (!copied.ok()) s.status = copied;
  }
  req->device.reset();
}

gravac_status Finish(gravac_context* ctx, absl::StatusOr<std::shared_ptr<RequestState>> state,
                     gravac_request** req) {
  if (!state.ok()) return Fail(ctx, state.status());
  *req = new gravac_request{std::move(*state)};
  return GRAVAC_OK;
}

}  // namespace

extern "C" {

gravac_status gravac_init(gravac_context** ctx) { return gravac_init_verbose(ctx, nullptr, 0); }

gravac_status gravac_init_verbose(gravac_context** ctx, char* error, size_t error_size) {
  return Init(gravac::client::ConfigFromEnvironment(gravac::ProcessEnvironment()), ctx, error,
              error_size);
}

gravac_status gravac_init_with_config(const gravac_config* config, gravac_context** ctx,
                                      char* error, size_t error_size) {
  if (config == nullptr) {
    return Init(absl::InvalidArgumentError("config is NULL"), ctx, error, error_size);
  }
  ClientConfig c;
  c.rank = config->rank;
  c.size = config->size;
  c.local_rank = config->local_rank;
  c.local_size = config->local_size;
  c.daemon_socket = config->daemon_socket != nullptr ? config->daemon_socket : "";
  if (config->connect_timeout_s > 0) c.connect_timeout = absl::Seconds(config->connect_timeout_s);
  if (config->staging_bytes > 0) c.staging_bytes = static_cast<uint64_t>(config->staging_bytes);
  c.zero_copy = config->no_zero_copy == 0;
  return Init(c, ctx, error, error_size);
}

gravac_status gravac_regroup(const char* first_run_id, int64_t from_version, int min_size,
                             int max_size, const char* expect_nodes, double timeout_s,
                             gravac_placement* out, char* error, size_t error_size) {
  if (out == nullptr) {
    CopyError(absl::InvalidArgumentError("out is NULL"), error, error_size);
    return GRAVAC_ERR_INVALID;
  }
  absl::StatusOr<ClientConfig> config =
      gravac::client::ConfigFromEnvironment(gravac::ProcessEnvironment());
  if (!config.ok()) {
    CopyError(config.status(), error, error_size);
    return FromStatus(config.status());
  }
  config->run_id = first_run_id != nullptr ? first_run_id : "";
  gravac::client::RegroupRequest request;
  request.from_version = from_version;
  request.min_size = min_size;
  request.max_size = max_size;
  if (expect_nodes != nullptr) {
    for (absl::string_view n : absl::StrSplit(expect_nodes, ',', absl::SkipEmpty())) {
      request.expect_nodes.emplace_back(n);
    }
  }
  if (timeout_s > 0) request.timeout = absl::Seconds(timeout_s);
  absl::StatusOr<gravac::v1::Placement> p = gravac::client::Regroup(*config, request);
  if (!p.ok()) {
    CopyError(p.status(), error, error_size);
    return FromStatus(p.status());
  }
  auto copy = [](const std::string& from, char* to, size_t size) {
    const size_t n = std::min(size - 1, from.size());
    std::memcpy(to, from.data(), n);
    to[n] = '\0';
  };
  *out = gravac_placement{};
  out->version = p->version();
  copy(p->run_id(), out->run_id, sizeof(out->run_id));
  out->rank = p->rank();
  out->size = p->size();
  out->local_rank = p->local_rank();
  out->local_size = p->local_size();
  out->node_rank = p->node_rank();
  out->nodes = p->nodes();
  copy(absl::StrJoin(p->lost_nodes(), ","), out->lost_nodes, sizeof(out->lost_nodes));
  copy(absl::StrJoin(p->added_nodes(), ","), out->added_nodes, sizeof(out->added_nodes));
  return GRAVAC_OK;
}

int gravac_rank(const gravac_context* ctx) { return ctx ? ctx->client->config().rank : -1; }
int gravac_size(const gravac_context* ctx) { return ctx ? ctx->client->config().size : -1; }
int gravac_local_rank(const gravac_context* ctx) {
  return ctx ? ctx->client->config().local_rank : -1;
}
int gravac_local_size(const gravac_context* ctx) {
  return ctx ? ctx->client->config().local_size : -1;
}

namespace {

gravac::client::DeviceHandoff& Handoff(gravac_context* ctx) {
  std::call_once(ctx->device_made, [ctx] {
    ctx->device = std::make_unique<gravac::client::DeviceHandoff>(
        ctx->client.get(), &ctx->runtime,
        [](const std::string& m) { std::fprintf(stderr, "gravac: %s\n", m.c_str()); });
  });
  return *ctx->device;
}

// The allreduce request of gravac_allreduce_async and its device twin (every rank must post a
// name with the same memory type); returns the tensor's bytes.
absl::StatusOr<uint64_t> AllreduceRequest(gravac_context* ctx, const char* name, const void* in,
                                          void* out, const int64_t* shape, int ndim,
                                          gravac_dtype dtype, gravac_op op,
                                          const gravac_tensor_options* options,
                                          gravac_request** req, v1::Request* r) {
  ASSIGN_OR_RETURN(uint64_t bytes, Prepare(ctx, name, shape, ndim, dtype, req, r));
  if (bytes > 0 && (in == nullptr || out == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s': NULL buffer", name));
  }
  if (op != GRAVAC_SUM && op != GRAVAC_AVERAGE) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s': unknown op", name));
  }
  r->set_kind(v1::ALLREDUCE);
  r->set_reduce_op(op == GRAVAC_SUM ? v1::SUM : v1::AVERAGE);
  if (options != nullptr) {
    r->set_step(options->step);
    r->set_samples(options->samples);
    r->set_compress(options->compress != 0);
    RETURN_IF_ERROR(SetProcessSet(ctx, name, &options->process_set, r));
  }
  return bytes;
}

}  // namespace

gravac_status gravac_allreduce_async(gravac_context* ctx, const char* name, const void* in,
                                     void* out, const int64_t* shape, int ndim, gravac_dtype dtype,
                                     gravac_op op, const gravac_tensor_options* options,
                                     gravac_request** req) {
  v1::Request r;
  r.set_memory(v1::HOST_MEMORY);
  auto bytes = AllreduceRequest(ctx, name, in, out, shape, ndim, dtype, op, options, req, &r);
  if (!bytes.ok()) return Fail(ctx, bytes.status());
  if (*bytes > 0) {
    // A CUDA tensor posted as host memory would be read as host memory: refuse it by name.
    gravac::client::DeviceHandoff& handoff = Handoff(ctx);
    if (absl::Status s = handoff.CheckHost(name, "in", in); !s.ok()) return Fail(ctx, s);
    if (absl::Status s = handoff.CheckHost(name, "out", out); !s.ok()) return Fail(ctx, s);
  }
  return Finish(ctx, ctx->client->Submit(std::move(r), in, out, *bytes, 0), req);
}

gravac_status gravac_allreduce_device_async(gravac_context* ctx, const char* name, const void* in,
                                            void* out, const int64_t* shape, int ndim,
                                            gravac_dtype dtype, gravac_op op,
                                            const gravac_tensor_options* options,
                                            const gravac_device* dev, gravac_request** req) {
  v1::Request r;
  r.set_memory(v1::DEVICE_MEMORY);
  auto bytes = AllreduceRequest(ctx, name, in, out, shape, ndim, dtype, op, options, req, &r);
  if (!bytes.ok()) return Fail(ctx, bytes.status());
  if (dev == nullptr) {
    return Fail(ctx, absl::InvalidArgumentError(absl::StrFormat(
                         "rank %d, tensor '%s': dev is NULL", ctx->client->config().rank, name)));
  }
  auto post = Handoff(ctx).Allreduce(std::move(r), in, out, *bytes, dev->device, dev->stream);
  if (!post.ok()) return Fail(ctx, post.status());
  *req = new gravac_request{std::move(post->state), std::move(post->completion)};
  return GRAVAC_OK;
}

gravac_status gravac_allgather_async(gravac_context* ctx, const char* name, const void* in,
                                     const int64_t* shape, int ndim, gravac_dtype dtype,
                                     gravac_request** req) {
  return gravac_allgather_async_on(ctx, name, in, shape, ndim, dtype, nullptr, req);
}

gravac_status gravac_allgather_async_on(gravac_context* ctx, const char* name, const void* in,
                                        const int64_t* shape, int ndim, gravac_dtype dtype,
                                        const gravac_process_set* set, gravac_request** req) {
  v1::Request r;
  auto bytes = Prepare(ctx, name, shape, ndim, dtype, req, &r);
  if (!bytes.ok()) return Fail(ctx, bytes.status());
  if (ndim < 1) {
    return Fail(ctx, absl::InvalidArgumentError(
                         absl::StrFormat("tensor '%s': allgather needs ndim >= 1", name)));
  }
  if (*bytes > 0 && in == nullptr) {
    return Fail(ctx, absl::InvalidArgumentError(absl::StrFormat("tensor '%s': NULL buffer", name)));
  }
  uint64_t row = gravac_dtype_size(dtype);
  for (int i = 1; i < ndim; ++i) row *= static_cast<uint64_t>(shape[i]);
  r.set_kind(v1::ALLGATHER);
  if (absl::Status s = SetProcessSet(ctx, name, set, &r); !s.ok()) return Fail(ctx, s);
  return Finish(ctx, ctx->client->Submit(std::move(r), in, nullptr, *bytes, row), req);
}

gravac_status gravac_allgather_result(gravac_request* req, int64_t* first_dim_total, void* out,
                                      size_t out_bytes) {
  if (req == nullptr) return GRAVAC_ERR_INVALID;
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  if (!s.done) return GRAVAC_ERR_PENDING;
  if (!s.status.ok()) return FromStatus(s.status);
  if (s.kind != v1::ALLGATHER || !s.gathered.has_value()) return GRAVAC_ERR_INVALID;
  int64_t total = 0;
  for (int64_t d : s.first_dims) total += d;
  if (first_dim_total != nullptr) *first_dim_total = total;
  if (out != nullptr) {
    if (out_bytes < s.result_bytes) return GRAVAC_ERR_INVALID;
    if (s.result_bytes > 0) std::memcpy(out, s.gathered->data(), s.result_bytes);
  }
  return GRAVAC_OK;
}

gravac_status gravac_allgather_result_bytes(const gravac_request* req, size_t* bytes) {
  if (req == nullptr || bytes == nullptr) return GRAVAC_ERR_INVALID;
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  if (!s.done) return GRAVAC_ERR_PENDING;
  if (!s.status.ok()) return FromStatus(s.status);
  if (s.kind != v1::ALLGATHER) return GRAVAC_ERR_INVALID;
  *bytes = s.result_bytes;
  return GRAVAC_OK;
}

gravac_status gravac_broadcast_async(gravac_context* ctx, const char* name, void* data,
                                     const int64_t* shape, int ndim, gravac_dtype dtype,
                                     int root_rank, gravac_request** req) {
  return gravac_broadcast_async_on(ctx, name, data, shape, ndim, dtype, root_rank, nullptr, req);
}

gravac_status gravac_broadcast_async_on(gravac_context* ctx, const char* name, void* data,
                                        const int64_t* shape, int ndim, gravac_dtype dtype,
                                        int root_rank, const gravac_process_set* set,
                                        gravac_request** req) {
  v1::Request r;
  auto bytes = Prepare(ctx, name, shape, ndim, dtype, req, &r);
  if (!bytes.ok()) return Fail(ctx, bytes.status());
  if (*bytes > 0 && data == nullptr) {
    return Fail(ctx, absl::InvalidArgumentError(absl::StrFormat("tensor '%s': NULL buffer", name)));
  }
  if (root_rank < 0 || root_rank >= ctx->client->config().size) {
    return Fail(ctx, absl::InvalidArgumentError(
                         absl::StrFormat("tensor '%s': root rank %d outside [0, %d)", name,
                                         root_rank, ctx->client->config().size)));
  }
  r.set_kind(v1::BROADCAST);
  r.set_root_rank(root_rank);
  if (absl::Status s = SetProcessSet(ctx, name, set, &r); !s.ok()) return Fail(ctx, s);
  return Finish(ctx, ctx->client->Submit(std::move(r), data, data, *bytes, 0), req);
}

gravac_status gravac_wait(gravac_request* req) {
  if (req == nullptr) return GRAVAC_ERR_INVALID;
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  while (!s.done) s.cv.Wait(&s.mu);
  FinishDevice(req, s);
  return FromStatus(s.status);
}

gravac_status gravac_poll(gravac_request* req, int* done) {
  if (req == nullptr || done == nullptr) return GRAVAC_ERR_INVALID;
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  *done = s.done ? 1 : 0;
  if (*done) FinishDevice(req, s);
  return GRAVAC_OK;
}

gravac_status gravac_result_info_get(const gravac_request* req, gravac_result_info* info) {
  if (req == nullptr || info == nullptr) return GRAVAC_ERR_INVALID;
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  if (!s.done) return GRAVAC_ERR_PENDING;
  if (!s.status.ok()) return FromStatus(s.status);
  info->theta = s.theta;
  std::memset(info->collective, 0, sizeof(info->collective));
  std::memcpy(info->collective, s.collective.data(),
              std::min(s.collective.size(), sizeof(info->collective) - 1));
  info->decision_epoch = s.decision_epoch;
  return GRAVAC_OK;
}

const char* gravac_request_error(const gravac_request* req) {
  if (req == nullptr) return "request is NULL";
  RequestState& s = *req->state;
  gravac::MutexLock lock(&s.mu);
  if (!s.done) return "";
  if (s.status.ok()) return "";
  s.error_text = std::string(s.status.message());
  return s.error_text.c_str();
}

void gravac_request_free(gravac_request* req) {
  if (req == nullptr) return;
  {
    gravac::MutexLock lock(&req->state->mu);
    req->state->abandoned = true;
  }
  delete req;
}

gravac_status gravac_buffer_alloc(gravac_context* ctx, size_t bytes, gravac_buffer** buf) {
  if (ctx == nullptr) return GRAVAC_ERR_INVALID;
  if (buf == nullptr) return Fail(ctx, absl::InvalidArgumentError("buf is NULL"));
  *buf = nullptr;
  const auto& registry = ctx->client->shared_buffers();
  auto buffer = registry->Allocate(bytes);
  if (!buffer.ok()) return Fail(ctx, buffer.status());
  *buf = new gravac_buffer{std::move(*buffer), registry};
  return GRAVAC_OK;
}

void* gravac_buffer_data(const gravac_buffer* buf) {
  return buf != nullptr ? buf->buffer.data : nullptr;
}

size_t gravac_buffer_size(const gravac_buffer* buf) {
  return buf != nullptr ? buf->buffer.bytes : 0;
}

void gravac_buffer_free(gravac_buffer* buf) {
  if (buf == nullptr) return;
  if (auto registry = buf->registry.lock()) registry->Free(buf->buffer.data).IgnoreError();
  delete buf;
}

gravac_status gravac_barrier(gravac_context* ctx) {
  if (ctx == nullptr) return GRAVAC_ERR_INVALID;
  absl::Status s = ctx->client->Barrier();
  return s.ok() ? GRAVAC_OK : Fail(ctx, s);
}

gravac_status gravac_join(gravac_context* ctx, int* last_joined_rank) {
  if (ctx == nullptr) return GRAVAC_ERR_INVALID;
  absl::StatusOr<int> last = ctx->client->Join();
  if (!last.ok()) return Fail(ctx, last.status());
  if (last_joined_rank != nullptr) *last_joined_rank = *last;
  return GRAVAC_OK;
}

gravac_status gravac_timeline(gravac_context* ctx, const char* path) {
  if (ctx == nullptr) return GRAVAC_ERR_INVALID;
  absl::Status s = ctx->client->Timeline(path == nullptr ? "" : path);
  return s.ok() ? GRAVAC_OK : Fail(ctx, s);
}

const char* gravac_last_error(const gravac_context* ctx) {
  if (ctx == nullptr) return "context is NULL";
  // Read under the lock (a failure on another thread rewrites it); the text stays valid until
  // the next failure on ctx, as gravac.h says.
  auto* mut = const_cast<gravac_context*>(ctx);
  gravac::MutexLock lock(&mut->error_mu);
  return mut->last_error.c_str();
}

gravac_status gravac_shutdown(gravac_context* ctx) {
  if (ctx == nullptr) return GRAVAC_ERR_INVALID;
  absl::Status s = ctx->client->Shutdown();
  delete ctx;
  return FromStatus(s);
}

int gravac_cuda_built(void) { return gravac::ipc::BuiltWithCuda() ? 1 : 0; }

int gravac_nccl_built(const gravac_context* ctx) {
  if (ctx == nullptr) return -1;
  return ctx->client->nccl_built() ? 1 : 0;
}

const char* gravac_status_string(gravac_status status) {
  switch (status) {
    case GRAVAC_OK:
      return "GRAVAC_OK";
    case GRAVAC_ERR_INVALID:
      return "GRAVAC_ERR_INVALID";
    case GRAVAC_ERR_UNAVAILABLE:
      return "GRAVAC_ERR_UNAVAILABLE";
    case GRAVAC_ERR_TIMEOUT:
      return "GRAVAC_ERR_TIMEOUT";
    case GRAVAC_ERR_MISMATCH:
      return "GRAVAC_ERR_MISMATCH";
    case GRAVAC_ERR_INTERNAL:
      return "GRAVAC_ERR_INTERNAL";
    case GRAVAC_ERR_SHUTDOWN:
      return "GRAVAC_ERR_SHUTDOWN";
    case GRAVAC_ERR_PENDING:
      return "GRAVAC_ERR_PENDING";
    case GRAVAC_ERR_REFUSED:
      return "GRAVAC_ERR_REFUSED";
  }
  return "GRAVAC_ERR_UNKNOWN";
}

const char* gravac_dtype_name(gravac_dtype dtype) {
  switch (dtype) {
    case GRAVAC_FLOAT32:
      return "float32";
    case GRAVAC_FLOAT64:
      return "float64";
    case GRAVAC_FLOAT16:
      return "float16";
    case GRAVAC_BFLOAT16:
      return "bfloat16";
    case GRAVAC_INT32:
      return "int32";
    case GRAVAC_INT64:
      return "int64";
    case GRAVAC_UINT8:
      return "uint8";
  }
  return "unknown";
}

size_t gravac_dtype_size(gravac_dtype dtype) {
  switch (dtype) {
    case GRAVAC_FLOAT32:
    case GRAVAC_INT32:
      return 4;
    case GRAVAC_FLOAT64:
    case GRAVAC_INT64:
      return 8;
    case GRAVAC_FLOAT16:
    case GRAVAC_BFLOAT16:
      return 2;
    case GRAVAC_UINT8:
      return 1;
  }
  return 0;
}

}  // extern "C"

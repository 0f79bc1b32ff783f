// gravac C++ API: RAII wrappers over the C API (gravac.h), without exceptions. Every call returns
// a gravac::client::Status (code + message); Context and Request free their handles on
// destruction (a Context's destructor calls gravac_shutdown).
//
//   gravac::client::Context ctx;
//   if (auto s = ctx.Init(); !s.ok()) { fprintf(stderr, "%s\n", s.message().c_str()); return 1; }
//   gravac::client::Request req;
//   s = ctx.AllreduceAsync("grad.w", w.data(), w.data(), {n}, GRAVAC_FLOAT32, GRAVAC_AVERAGE,
//                          nullptr, &req);
//   if (s.ok()) s = req.Wait();
//
// Thread-safety: as gravac.h (a Context may be shared by threads; a Request is used by one).
#ifndef GRAVAC_GRAVAC_HPP_
#define GRAVAC_GRAVAC_HPP_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gravac/gravac.h"

namespace gravac::client {

class Status {
 public:
  Status() = default;
  Status(gravac_status code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == GRAVAC_OK; }
  gravac_status code() const { return code_; }
  const std::string& message() const { return message_; }
  // "GRAVAC_ERR_MISMATCH: <message>", or "GRAVAC_OK".
  std::string ToString() const {
    std::string s = gravac_status_string(code_);
    if (!message_.empty()) s += ": " + message_;
    return s;
  }

 private:
  gravac_status code_ = GRAVAC_OK;
  std::string message_;
};

class Request {
 public:
  Request() = default;
  Request(Request&& other) noexcept : req_(std::exchange(other.req_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      gravac_request_free(req_);
      req_ = std::exchange(other.req_, nullptr);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { gravac_request_free(req_); }

  bool valid() const { return req_ != nullptr; }
  gravac_request* get() const { return req_; }
  gravac_request** out() {
    gravac_request_free(req_);
    req_ = nullptr;
    return &req_;
  }

  Status Wait() { return Make(gravac_wait(req_)); }
  // Sets *done; the request's own failure shows in Wait().
  Status Poll(bool* done) {
    int d = 0;
    gravac_status s = gravac_poll(req_, &d);
    *done = d != 0;
    return Status(s, "");
  }
  Status Info(gravac_result_info* info) const { return Make(gravac_result_info_get(req_, info)); }
  // Allgather: the concatenated result (after a successful Wait); *first_dim_total may be null.
  template <typename T>
  Status AllgatherResult(std::vector<T>* out, int64_t* first_dim_total = nullptr) {
    size_t bytes = 0;
    gravac_status s = gravac_allgather_result_bytes(req_, &bytes);
    if (s != GRAVAC_OK) return Make(s);
    out->resize((bytes + sizeof(T) - 1) / sizeof(T));
    return Make(
        gravac_allgather_result(req_, first_dim_total, out->data(), out->size() * sizeof(T)));
  }

 private:
  Status Make(gravac_status s) const {
    return s == GRAVAC_OK ? Status() : Status(s, req_ ? gravac_request_error(req_) : "");
  }
  gravac_request* req_ = nullptr;
};

// A shared buffer (gravac_buffer_alloc): in-place collectives on its memory skip the staging
// copies. Valid also after the Context shut down; freed by the destructor.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept : buf_(std::exchange(other.buf_, nullptr)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      gravac_buffer_free(buf_);
      buf_ = std::exchange(other.buf_, nullptr);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { gravac_buffer_free(buf_); }

  bool valid() const { return buf_ != nullptr; }
  void* data() const { return gravac_buffer_data(buf_); }
  size_t size() const { return gravac_buffer_size(buf_); }
  gravac_buffer** out() {
    gravac_buffer_free(buf_);
    buf_ = nullptr;
    return &buf_;
  }

 private:
  gravac_buffer* buf_ = nullptr;
};

class Context {
 public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { Shutdown(); }

  // From the GRAVAC_* environment.
  Status Init() {
    char error[1024] = {0};
    gravac_status s = gravac_init_verbose(&ctx_, error, sizeof(error));
    return Status(s, s == GRAVAC_OK ? "" : error);
  }
  Status Init(const gravac_config& config) {
    char error[1024] = {0};
    gravac_status s = gravac_init_with_config(&config, &ctx_, error, sizeof(error));
    return Status(s, s == GRAVAC_OK ? "" : error);
  }
  bool valid() const { return ctx_ != nullptr; }
  gravac_context* get() const { return ctx_; }

  int rank() const { return gravac_rank(ctx_); }
  int size() const { return gravac_size(ctx_); }
  int local_rank() const { return gravac_local_rank(ctx_); }
  int local_size() const { return gravac_local_size(ctx_); }

  Status AllreduceAsync(const char* name, const void* in, void* out,
                        const std::vector<int64_t>& shape, gravac_dtype dtype, gravac_op op,
                        const gravac_tensor_options* options, Request* req) {
    return Make(gravac_allreduce_async(ctx_, name, in, out, shape.data(),
                                       static_cast<int>(shape.size()), dtype, op, options,
                                       req->out()));
  }
  Status Allreduce(const char* name, const void* in, void* out, const std::vector<int64_t>& shape,
                   gravac_dtype dtype, gravac_op op,
                   const gravac_tensor_options* options = nullptr) {
    Request req;
    Status s = AllreduceAsync(name, in, out, shape, dtype, op, options, &req);
    return s.ok() ? req.Wait() : s;
  }
  Status AllgatherAsync(const char* name, const void* in, const std::vector<int64_t>& shape,
                        gravac_dtype dtype, Request* req) {
    return Make(gravac_allgather_async(ctx_, name, in, shape.data(), static_cast<int>(shape.size()),
                                       dtype, req->out()));
  }
  Status BroadcastAsync(const char* name, void* data, const std::vector<int64_t>& shape,
                        gravac_dtype dtype, int root_rank, Request* req) {
    return Make(gravac_broadcast_async(ctx_, name, data, shape.data(),
                                       static_cast<int>(shape.size()), dtype, root_rank,
                                       req->out()));
  }
  Status AllocateBuffer(size_t bytes, Buffer* buf) {
    return Make(gravac_buffer_alloc(ctx_, bytes, buf->out()));
  }
  Status Barrier() { return Make(gravac_barrier(ctx_)); }
  // Horovod's join (gravac_join); *last_joined_rank may be null.
  Status Join(int* last_joined_rank) { return Make(gravac_join(ctx_, last_joined_rank)); }
  // Horovod's timeline (gravac_timeline); "" stops it.
  Status Timeline(const char* path) { return Make(gravac_timeline(ctx_, path)); }
  // Idempotent; the destructor calls it.
  Status Shutdown() {
    if (ctx_ == nullptr) return Status();
    gravac_status s = gravac_shutdown(ctx_);
    ctx_ = nullptr;
    return Status(s, s == GRAVAC_OK ? "" : "shutdown failed");
  }

 private:
  Status Make(gravac_status s) const {
    return s == GRAVAC_OK ? Status() : Status(s, ctx_ ? gravac_last_error(ctx_) : "no context");
  }
  gravac_context* ctx_ = nullptr;
};

}  // namespace gravac::client

#endif  // GRAVAC_GRAVAC_HPP_

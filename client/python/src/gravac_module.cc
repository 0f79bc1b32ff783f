// gravac._gravac: the Python extension over the C API (gravac/gravac.h). It knows nothing about
// PyTorch: the pure-Python package (gravac.torch) passes raw data pointers, shapes and dtype codes
// of contiguous CPU buffers (or CUDA buffers, their device and stream, to
// allreduce_device_async) and keeps the buffers alive until their requests complete.
//
// Errors: every failed call raises gravac._gravac.GravacError (a RuntimeError) whose message is
// the C API's (the daemon's message for a failed request: it names the rank, tensor and field);
// the exception carries `status` (e.g. "GRAVAC_ERR_MISMATCH") and `code` (the gravac_status).
// Failures of the world rather than of the call (a lost worker, daemon or peer node, an operation
// past its time bound, a stopped daemon: GRAVAC_ERR_UNAVAILABLE, _TIMEOUT, _SHUTDOWN) raise the
// subclass gravac._gravac.HorovodInternalError, which Horovod's elastic loop catches. A refusal of
// the worker's job by its daemon or the controller (GRAVAC_ERR_REFUSED: a job the daemon does not
// serve, no free slots, a run id that ended, an exhausted data-port range) raises the subclass
// gravac._gravac.JobRefusedError, which names the job and the node.
//
// Blocking and the GIL: Request.wait, Context.barrier and Context.shutdown release the GIL while
// they block; everything else returns at once (the *_async calls copy their input before
// returning). Thread-safety: as gravac.h; a Context may be used from several Python threads, a
// Request by one at a time.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gravac/gravac.h"

namespace py = pybind11;

namespace gravac::python {
namespace {

constexpr char kModuleName[] = "gravac._gravac";

// True for the statuses that say the job's world failed (not this call's arguments).
bool IsWorldFailure(gravac_status status) {
  return status == GRAVAC_ERR_UNAVAILABLE || status == GRAVAC_ERR_TIMEOUT ||
         status == GRAVAC_ERR_SHUTDOWN;
}

// Raises GravacError(message), or its subclass HorovodInternalError for a world failure or
// JobRefusedError for a refusal, with .status and .code set.
[[noreturn]] void Raise(gravac_status status, const std::string& message) {
  const char* name = IsWorldFailure(status)          ? "HorovodInternalError"
                     : status == GRAVAC_ERR_REFUSED ? "JobRefusedError"
                                                    : "GravacError";
  py::object type = py::module_::import(kModuleName).attr(name);
  std::string text = message.empty() ? std::string(gravac_status_string(status)) : message;
  py::object error = type(text);
  error.attr("status") = py::str(gravac_status_string(status));
  error.attr("code") = py::int_(static_cast<int>(status));
  PyErr_SetObject(type.ptr(), error.ptr());
  throw py::error_already_set();
}

void* AsPointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

gravac_dtype AsDtype(int code) {
  if (code < GRAVAC_FLOAT32 || code > GRAVAC_UINT8) {
    Raise(GRAVAC_ERR_INVALID, "unknown dtype code " + std::to_string(code));
  }
  return static_cast<gravac_dtype>(code);
}

// One pending or completed collective. Owns its gravac_request; the buffers it writes are kept
// alive by the Python caller.
class Request {
 public:
  explicit Request(gravac_request* req) : req_(req) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { gravac_request_free(req_); }

  // Blocks (GIL released) until the request completes; raises its error.
  void Wait() {
    gravac_status s;
    {
      py::gil_scoped_release release;
      s = gravac_wait(req_);
    }
    if (s != GRAVAC_OK) Raise(s, gravac_request_error(req_));
  }

  // True once the request completed (successfully or not); never blocks.
  bool Poll() {
    int done = 0;
    gravac_status s = gravac_poll(req_, &done);
    if (s != GRAVAC_OK) Raise(s, gravac_request_error(req_));
    return done != 0;
  }

  // (theta, collective, decision_epoch) of a completed request.
  std::tuple<double, std::string, int64_t> Info() const {
    gravac_result_info info{};
    gravac_status s = gravac_result_info_get(req_, &info);
    if (s != GRAVAC_OK) Raise(s, "result info unavailable");
    info.collective[sizeof(info.collective) - 1] = '\0';
    return {info.theta, std::string(info.collective), info.decision_epoch};
  }

  // Allgather: (first_dim_total, result bytes) after a successful wait.
  std::pair<int64_t, size_t> AllgatherSize() const {
    int64_t total = 0;
    size_t bytes = 0;
    gravac_status s = gravac_allgather_result(req_, &total, nullptr, 0);
    if (s == GRAVAC_OK) s = gravac_allgather_result_bytes(req_, &bytes);
    if (s != GRAVAC_OK) Raise(s, "allgather result unavailable");
    return {total, bytes};
  }

  // Allgather: copies the result into the buffer at `out` (out_bytes long).
  void AllgatherCopy(uintptr_t out, size_t out_bytes) const {
    gravac_status s = gravac_allgather_result(req_, nullptr, AsPointer(out), out_bytes);
    if (s != GRAVAC_OK) Raise(s, "allgather result does not fit the output buffer");
  }

  std::string Error() const { return gravac_request_error(req_); }

 private:
  gravac_request* req_;
};

// A shared buffer (gravac_buffer_alloc): writable bytes for the Python buffer protocol, so that
// torch.frombuffer can put a tensor on it (the tensor keeps this object, hence the memory, alive).
// Valid after the context shut down; freed when the last reference goes.
class Buffer {
 public:
  explicit Buffer(gravac_buffer* buf) : buf_(buf) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { gravac_buffer_free(buf_); }

  uint8_t* data() const { return static_cast<uint8_t*>(gravac_buffer_data(buf_)); }
  size_t size() const { return gravac_buffer_size(buf_); }

 private:
  gravac_buffer* buf_;
};

// One worker's connection to its node's daemon.
class Context {
 public:
  explicit Context(gravac_context* ctx) : ctx_(ctx) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
    if (ctx_ != nullptr) {
      gravac_context* ctx = std::exchange(ctx_, nullptr);
      py::gil_scoped_release release;
      gravac_shutdown(ctx);
    }
  }

  // From the GRAVAC_* environment; blocks (GIL released) up to the connect timeout.
  static std::unique_ptr<Context> FromEnvironment() {
    gravac_context* ctx = nullptr;
    char error[1024] = {0};
    gravac_status s;
    {
      py::gil_scoped_release release;
      s = gravac_init_verbose(&ctx, error, sizeof(error));
    }
    if (s != GRAVAC_OK) Raise(s, std::string("gravac init failed: ") + error);
    return std::make_unique<Context>(ctx);
  }

  int rank() const { return gravac_rank(Checked()); }
  int size() const { return gravac_size(Checked()); }
  int local_rank() const { return gravac_local_rank(Checked()); }
  int local_size() const { return gravac_local_size(Checked()); }
  bool nccl_built() const { return gravac_nccl_built(Checked()) == 1; }
  bool closed() const { return ctx_ == nullptr; }

  std::unique_ptr<Request> AllreduceAsync(const std::string& name, uintptr_t in, uintptr_t out,
                                          const std::vector<int64_t>& shape, int dtype, int op,
                                          int64_t step, int64_t samples, bool compress,
                                          const std::vector<int32_t>& process_set) {
    gravac_tensor_options options{step, samples, compress ? 1 : 0,
                                  {process_set.data(), static_cast<int>(process_set.size())}};
    if (op != GRAVAC_SUM && op != GRAVAC_AVERAGE) {
      Raise(GRAVAC_ERR_INVALID, "tensor '" + name + "': unknown op " + std::to_string(op));
    }
    gravac_request* req = nullptr;
    Check(gravac_allreduce_async(Checked(), name.c_str(), AsPointer(in), AsPointer(out),
                                 shape.data(), static_cast<int>(shape.size()), AsDtype(dtype),
                                 static_cast<gravac_op>(op), &options, &req));
    return std::make_unique<Request>(req);
  }

  // gravac_allreduce_device_async: `in` and `out` are device pointers of CUDA device `device`,
  // ordered on `stream` (a cudaStream_t as an integer; 0: the legacy default stream).
  std::unique_ptr<Request> AllreduceDeviceAsync(const std::string& name, uintptr_t in,
                                                uintptr_t out, const std::vector<int64_t>& shape,
                                                int dtype, int op, int64_t step, int64_t samples,
                                                bool compress,
                                                const std::vector<int32_t>& process_set,
                                                int device, uintptr_t stream) {
    gravac_tensor_options options{step, samples, compress ? 1 : 0,
                                  {process_set.data(), static_cast<int>(process_set.size())}};
    if (op != GRAVAC_SUM && op != GRAVAC_AVERAGE) {
      Raise(GRAVAC_ERR_INVALID, "tensor '" + name + "': unknown op " + std::to_string(op));
    }
    const gravac_device dev{device, AsPointer(stream)};
    gravac_request* req = nullptr;
    Check(gravac_allreduce_device_async(Checked(), name.c_str(), AsPointer(in), AsPointer(out),
                                        shape.data(), static_cast<int>(shape.size()),
                                        AsDtype(dtype), static_cast<gravac_op>(op), &options,
                                        &dev, &req));
    return std::make_unique<Request>(req);
  }

  std::unique_ptr<Request> AllgatherAsync(const std::string& name, uintptr_t in,
                                          const std::vector<int64_t>& shape, int dtype,
                                          const std::vector<int32_t>& process_set) {
    gravac_request* req = nullptr;
    const gravac_process_set set{process_set.data(), static_cast<int>(process_set.size())};
    Check(gravac_allgather_async_on(Checked(), name.c_str(), AsPointer(in), shape.data(),
                                    static_cast<int>(shape.size()), AsDtype(dtype), &set, &req));
    return std::make_unique<Request>(req);
  }

  std::unique_ptr<Request> BroadcastAsync(const std::string& name, uintptr_t data,
                                          const std::vector<int64_t>& shape, int dtype,
                                          int root_rank, const std::vector<int32_t>& process_set) {
    gravac_request* req = nullptr;
    const gravac_process_set set{process_set.data(), static_cast<int>(process_set.size())};
    Check(gravac_broadcast_async_on(Checked(), name.c_str(), AsPointer(data), shape.data(),
                                    static_cast<int>(shape.size()), AsDtype(dtype), root_rank,
                                    &set, &req));
    return std::make_unique<Request>(req);
  }

  std::unique_ptr<Buffer> AllocBuffer(size_t bytes) {
    gravac_buffer* buf = nullptr;
    Check(gravac_buffer_alloc(Checked(), bytes, &buf));
    return std::make_unique<Buffer>(buf);
  }

  void Barrier() {
    gravac_context* ctx = Checked();
    gravac_status s;
    {
      py::gil_scoped_release release;
      s = gravac_barrier(ctx);
    }
    Check(s);
  }

  // Horovod's join (GIL released); returns the last joined rank.
  int Join() {
    gravac_context* ctx = Checked();
    gravac_status s;
    int last = -1;
    {
      py::gil_scoped_release release;
      s = gravac_join(ctx, &last);
    }
    Check(s);
    return last;
  }

  // Horovod's start_timeline (path) / stop_timeline ("") on this worker's daemon.
  void Timeline(const std::string& path) {
    gravac_context* ctx = Checked();
    gravac_status s;
    {
      py::gil_scoped_release release;
      s = gravac_timeline(ctx, path.c_str());
    }
    Check(s);
  }

  // Says goodbye to the daemon and frees the context; later calls raise. Idempotent.
  void Shutdown() {
    if (ctx_ == nullptr) return;
    gravac_context* ctx = std::exchange(ctx_, nullptr);
    gravac_status s;
    {
      py::gil_scoped_release release;
      s = gravac_shutdown(ctx);
    }
    if (s != GRAVAC_OK) Raise(s, "gravac shutdown failed");
  }

 private:
  gravac_context* Checked() const {
    if (ctx_ == nullptr) Raise(GRAVAC_ERR_SHUTDOWN, "gravac context is shut down");
    return ctx_;
  }
  void Check(gravac_status s) const {
    if (s != GRAVAC_OK) Raise(s, gravac_last_error(ctx_));
  }

  gravac_context* ctx_;
};

}  // namespace
}  // namespace gravac::python

PYBIND11_MODULE(_gravac, m) {
  using gravac::python::Buffer;
  using gravac::python::Context;
  using gravac::python::Request;
  m.doc() = "gravac C API binding (use the gravac / gravac.torch packages)";

  PyObject* error = PyErr_NewException("gravac._gravac.GravacError", PyExc_RuntimeError, nullptr);
  if (error == nullptr) throw py::error_already_set();
  m.add_object("GravacError", py::reinterpret_steal<py::object>(error));
  PyObject* world = PyErr_NewException("gravac._gravac.HorovodInternalError", error, nullptr);
  if (world == nullptr) throw py::error_already_set();
  m.add_object("HorovodInternalError", py::reinterpret_steal<py::object>(world));
  PyObject* refused = PyErr_NewException("gravac._gravac.JobRefusedError", error, nullptr);
  if (refused == nullptr) throw py::error_already_set();
  m.add_object("JobRefusedError", py::reinterpret_steal<py::object>(refused));

  m.attr("FLOAT32") = static_cast<int>(GRAVAC_FLOAT32);
  m.attr("FLOAT64") = static_cast<int>(GRAVAC_FLOAT64);
  m.attr("FLOAT16") = static_cast<int>(GRAVAC_FLOAT16);
  m.attr("BFLOAT16") = static_cast<int>(GRAVAC_BFLOAT16);
  m.attr("INT32") = static_cast<int>(GRAVAC_INT32);
  m.attr("INT64") = static_cast<int>(GRAVAC_INT64);
  m.attr("UINT8") = static_cast<int>(GRAVAC_UINT8);
  m.attr("SUM") = static_cast<int>(GRAVAC_SUM);
  m.attr("AVERAGE") = static_cast<int>(GRAVAC_AVERAGE);
  m.def(
      "regroup",
      [](const std::string& first_run_id, int64_t from_version, int min_size, int max_size,
         double timeout_s, const std::string& expect_nodes) {
        gravac_placement p{};
        char error[1024] = {0};
        gravac_status s;
        {
          py::gil_scoped_release release;
          s = gravac_regroup(first_run_id.c_str(), from_version, min_size, max_size,
                             expect_nodes.c_str(), timeout_s, &p, error, sizeof(error));
        }
        if (s != GRAVAC_OK) {
          gravac::python::Raise(s, std::string("elastic regroup failed: ") + error);
        }
        py::dict d;
        d["version"] = p.version;
        d["run_id"] = std::string(p.run_id);
        d["rank"] = p.rank;
        d["size"] = p.size;
        d["local_rank"] = p.local_rank;
        d["local_size"] = p.local_size;
        d["node_rank"] = p.node_rank;
        d["nodes"] = p.nodes;
        d["lost_nodes"] = std::string(p.lost_nodes);
        d["added_nodes"] = std::string(p.added_nodes);
        return d;
      },
      py::arg("first_run_id"), py::arg("from_version"), py::arg("min_size") = 0,
      py::arg("max_size") = 0, py::arg("timeout_s") = 0.0, py::arg("expect_nodes") = "",
      "Asks this node's daemon for this worker's place in the job's next membership (elastic "
      "jobs; expect_nodes: after a host update, the comma-separated nodes it should hold); returns a dict (version, run_id, rank, size, local_rank, local_size, node_rank, "
      "nodes, lost_nodes, added_nodes).");
  m.def("cuda_built", [] { return gravac_cuda_built() != 0; },
        "True when libgravac was built with CUDA (CUDA tensors go to gravacd by CUDA IPC).");
  m.def("dtype_size", [](int code) { return gravac_dtype_size(static_cast<gravac_dtype>(code)); });
  m.def("status_string", [](int code) {
    return std::string(gravac_status_string(static_cast<gravac_status>(code)));
  });

  py::class_<Request>(m, "Request")
      .def("wait", &Request::Wait, "Blocks until done (GIL released); raises GravacError.")
      .def("poll", &Request::Poll, "True once done; never blocks.")
      .def("info", &Request::Info, "(theta, collective, decision_epoch) of a completed request.")
      .def("allgather_size", &Request::AllgatherSize, "(first_dim_total, bytes) after wait().")
      .def("allgather_copy", &Request::AllgatherCopy, py::arg("out"), py::arg("out_bytes"))
      .def("error", &Request::Error);

  py::class_<Buffer>(m, "Buffer", py::buffer_protocol(),
                     "Shared memory the daemon maps: in-place collectives on it skip the staging "
                     "copies.")
      .def_buffer([](Buffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1}, /*readonly=*/false);
      })
      .def_property_readonly("address",
                             [](const Buffer& b) { return reinterpret_cast<uintptr_t>(b.data()); })
      .def_property_readonly("nbytes", &Buffer::size);

  py::class_<Context>(m, "Context")
      .def_static("from_environment", &Context::FromEnvironment,
                  "Connects to the node's daemon from the GRAVAC_* environment.")
      .def_property_readonly("rank", &Context::rank)
      .def_property_readonly("size", &Context::size)
      .def_property_readonly("local_rank", &Context::local_rank)
      .def_property_readonly("local_size", &Context::local_size)
      .def_property_readonly("nccl_built", &Context::nccl_built,
                             "Whether the node's gravacd was built with NCCL device collectives.")
      .def_property_readonly("closed", &Context::closed)
      .def("allreduce_async", &Context::AllreduceAsync, py::arg("name"), py::arg("inp"),
           py::arg("out"), py::arg("shape"), py::arg("dtype"), py::arg("op"), py::arg("step") = -1,
           py::arg("samples") = 0, py::arg("compress") = false,
           py::arg("process_set") = std::vector<int32_t>{})
      .def("allreduce_device_async", &Context::AllreduceDeviceAsync, py::arg("name"),
           py::arg("inp"), py::arg("out"), py::arg("shape"), py::arg("dtype"), py::arg("op"),
           py::arg("step") = -1, py::arg("samples") = 0, py::arg("compress") = false,
           py::arg("process_set") = std::vector<int32_t>{}, py::arg("device") = 0,
           py::arg("stream") = uintptr_t{0})
      .def("allgather_async", &Context::AllgatherAsync, py::arg("name"), py::arg("inp"),
           py::arg("shape"), py::arg("dtype"), py::arg("process_set") = std::vector<int32_t>{})
      .def("broadcast_async", &Context::BroadcastAsync, py::arg("name"), py::arg("data"),
           py::arg("shape"), py::arg("dtype"), py::arg("root_rank"),
           py::arg("process_set") = std::vector<int32_t>{})
      .def("alloc_buffer", &Context::AllocBuffer, py::arg("nbytes"),
           "A shared buffer of nbytes bytes (gravac_buffer_alloc).")
      .def("barrier", &Context::Barrier)
      .def("join", &Context::Join, "Horovod's join; returns the last joined rank.")
      .def("timeline", &Context::Timeline, py::arg("path"),
           "Starts the daemon's timeline in `path`; \"\" stops it.")
      .def("shutdown", &Context::Shutdown);
}

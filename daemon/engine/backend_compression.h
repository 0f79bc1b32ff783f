// BackendCompression: the engine's error-feedback top-k (GRAVAC.md "Error feedback", "Multi-level
// compression") on kernels' CompressionBackend + TopKStep (kernels/backend.h, backend_step.h), the
// backend chosen by the tensor's memory type: the CPU backend for host tensors, the CUDA backend
// of the tensor's device for device tensors. One TopKStep per tensor name keeps the residual e,
// p = g + e and the selected messages in that backend's memory (device memory for a device
// tensor on the CUDA backend).
//
// What it runs (Runs): the job's compressor when it is "topk" with fp32 sparse values, the one
// compressor the backends implement. Its messages and residuals are bit for bit those of the CPU
// compressor path (cpu::TopKCompressor + cpu::ErrorFeedback), and its errors read the same (a
// non-finite p names the tensor and the first bad index). randomk, dgc, redsync, the fp16 / bf16
// casts and topk with fp16 / bf16 values keep the CPU compressor path (the Executor's
// ResidualStore): the backends have no seeded random selection, threshold rules or value
// rounding.
//
// g reaches the engine in device memory when the local side reduced the node's workers there
// (NodeTensor::device_data): the device backend reads it in place (CompensateFromDevice). A
// device tensor that reaches it in host memory (reduced on the host, or staged by its workers)
// is copied to the device each step (one staging buffer per backend). Either way the sent
// message (k indices and values) is copied back for the wire encoding; p, the residual and both
// levels stay on the device. On the CPU backend the wire encoding reads the sent message where
// it lies (HostMessage).
//
// Norms of the statistics: on the CPU backend they are in kernels::L2Norm's order, bit for bit
// the CPU compressor path's (‖g‖ from the compensation pass, the levels' from their host
// copies, or in place, Norm, for a θ_min level that is not sent). On a device backend they come
// from its SumSquares (kernels/cpu/sum_squares.h's order, which the CUDA twin follows bit for bit)
// over g, θ_min's and θ_c's messages where they lie: nothing of size n crosses to the host for
// them, and both levels are selected there (LevelsOnDevice), θ_c's directly from p (for topk the
// same message as from θ_min's).
//
// A device tensor whose backend cannot be made (gravac built without CUDA, no usable device, no
// device known for the tensor) is compressed on the CPU backend, said once per device in the log;
// its results are the same (the CUDA kernels match their CPU twins bit for bit).
//
// The CUDA devices' backends come from a DeviceBackendFactory (kernels::MakeCompressionBackend
// by default; tests pass fakes that run the CPU kernels on memory of their own).
//
// Thread-safety: not thread-safe; owned by the engine thread (through the Executor).
#ifndef GRAVAC_DAEMON_ENGINE_BACKEND_COMPRESSION_H_
#define GRAVAC_DAEMON_ENGINE_BACKEND_COMPRESSION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/logging.h"
#include "core/memory_type.h"
#include "daemon/engine/device_data.h"
#include "daemon/engine/types.h"
#include "kernels/backend.h"
#include "kernels/backend_step.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"

namespace gravac::daemon::internal {

// Makes the compression backend of a CUDA device; an error means the device's tensors are
// compressed on the CPU backend.
using DeviceBackendFactory = kernels::DeviceBackendFactory;

class BackendCompression {
 public:
  using Level = kernels::TopKStep::Level;

  // True when the backends run `compressor` (may be null) at `value_type`: topk with fp32 values.
  static bool Runs(const kernels::Compressor* compressor, kernels::ValueType value_type);

  // `log` (may be null) gets the one line per device that falls back to the CPU backend;
  // `make_device` null: kernels::MakeCompressionBackend(kDevice, device).
  explicit BackendCompression(Logger* log, DeviceBackendFactory make_device = nullptr);

  // p = g + e for tensor `spec` (g: its n = Elements(spec.shape) floats, in host memory) on the
  // backend of spec.memory (and `device` for kDevice), and ‖g‖ into *grad_norm: on the CPU
  // backend from the same pass in kernels::L2Norm's order (bit for bit), on a device backend
  // from its SumSquares over g in device memory (blocking on its queued work). A tensor whose
  // size or backend changed starts from a zero residual. On error the residual is unchanged.
  absl::Status Compensate(const TensorSpec& spec, int device, absl::Span<const float> g,
                          double* grad_norm);
  // Compensate for a tensor the local side reduced in device memory (NodeTensor::device_data):
  // on the device backend of g.device(), g is read in place (no staging through the host) and
  // the result is true. False, with nothing done, when that device has no backend (the CPU
  // backend serves it): the caller copies g to host memory and calls Compensate.
  // kInvalidArgument when g's size is not the shape's.
  absl::StatusOr<bool> CompensateFromDevice(const TensorSpec& spec, const DeviceData& g,
                                            double* grad_norm);
  // Whether the tensor's state is on a device backend: its levels are then selected and their
  // norms taken there (Select with out = nullptr, Norm), and only a sent message is copied out.
  bool LevelsOnDevice(const std::string& name) const;
  // The message at θ of the last Compensate's p: its top KeepCount(n, θ) into `level`'s message
  // (TopKStep::Select), copied into *out as the topk compressor makes it (sparse, fp32); out
  // nullptr: left in the backend's memory. θ < 1 and non-finite p are InvalidArgument with the
  // topk compressor's messages.
  absl::Status Select(const std::string& name, Level level, double theta, kernels::Compressed* out);
  // The selected message of `level` into *out (host memory), as Select does.
  absl::Status CopyMessage(const std::string& name, Level level, kernels::Compressed* out);
  // The selected message of `level` as the topk compressor makes it (sparse, fp32), over the
  // CPU backend's buffers: encoded from there, no copy. Valid until that level is selected again
  // or the tensor's state is replaced. kFailedPrecondition for a tensor on a device backend.
  absl::StatusOr<kernels::CompressedView> HostMessage(const std::string& name, Level level);
  // Multi-level compression on the CPU backend: the candidate's message at θ_c selected from
  // θ_min's selected message where it lies (the topk compressor's CompressFrom, bit for bit) into
  // *out (host memory). The backend's candidate level is not touched. kFailedPrecondition for a
  // tensor on a device backend (which selects θ_c from p there).
  absl::Status CandidateFromMin(const std::string& name, double theta_c, kernels::Compressed* out);
  // ‖level's message‖ over its values where they lie, without a copy: on a device backend from
  // its SumSquares; on the CPU backend in kernels::L2Norm's order (the CPU compressor path's, bit
  // for bit).
  absl::StatusOr<double> Norm(const std::string& name, Level level);
  // e = p - the level's message (it was sent); e = 0 (p was sent dense).
  absl::Status Commit(const std::string& name, Level sent);
  absl::Status CommitDense(const std::string& name);
  // p of the last Compensate into `bytes` (n floats) of host memory at `out`: a dense step's send.
  absl::Status CopyP(const std::string& name, void* out, size_t bytes);

  // For the engine's device step (executor_device.cc), which moves the messages between device
  // buffers without a host copy. The backend of CUDA device `device` (>= 0), made on first use as
  // for its tensors; nullptr when that device has none (its tensors use the CPU backend).
  kernels::CompressionBackend* DeviceBackend(int device);
  // The backend holding the tensor's state, p of its last Compensate and a level's selected
  // message, all in that backend's memory. kFailedPrecondition naming the tensor without state.
  absl::StatusOr<kernels::CompressionBackend*> TensorBackend(const std::string& name);
  absl::StatusOr<const float*> P(const std::string& name);
  absl::StatusOr<kernels::TopKStep::Message> Message(const std::string& name, Level level);

  // A copy of the tensor's residual; empty when none (tests).
  std::vector<float> Residual(const std::string& name) const;
  // The backend holding the tensor's residual ("cpu", "cuda"); "" when none.
  std::string_view BackendOf(const std::string& name) const;

 private:
  struct Tensor {
    kernels::CompressionBackend* backend = nullptr;
    std::unique_ptr<kernels::TopKStep> step;
  };

  // The backend for `type` / `device`, made on first use; a device that has none gets the CPU
  // backend (said once).
  absl::StatusOr<kernels::CompressionBackend*> BackendFor(MemoryType type, int device);
  absl::StatusOr<Tensor*> Find(const std::string& name);
  // The tensor's state for the next step: made (zero residual) when new or its size or backend
  // changed.
  absl::StatusOr<Tensor*> StateFor(const TensorSpec& spec, int64_t n,
                                   kernels::CompressionBackend* backend);

  Logger* log_;
  DeviceBackendFactory make_device_;
  std::unique_ptr<kernels::CompressionBackend> host_;
  // By CUDA device; nullptr: no backend there (the CPU backend serves its tensors).
  std::map<int, std::unique_ptr<kernels::CompressionBackend>> devices_;
  bool said_no_device_ = false;  // a device tensor without a known device was logged
  // Per device backend: g copied from host memory, grown to the largest tensor.
  std::map<kernels::CompressionBackend*, std::unique_ptr<kernels::BackendMemory>> staging_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_BACKEND_COMPRESSION_H_

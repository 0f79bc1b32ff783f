#include "daemon/engine/backend_compression.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "daemon/engine/fusion_plan.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/selection_output.h"
#include "kernels/multilevel.h"

namespace gravac::daemon::internal {

using kernels::CompressionBackend;
using kernels::TopKStep;

bool BackendCompression::Runs(const kernels::Compressor* compressor,
                              kernels::ValueType value_type) {
  return compressor != nullptr && compressor->name() == "topk" &&
         value_type == kernels::ValueType::kFloat32;
}

BackendCompression::BackendCompression(Logger* log, DeviceBackendFactory make_device)
    : log_(log), make_device_(std::move(make_device)) {
  if (make_device_ == nullptr) {
    make_device_ = [](int device) {
      return kernels::MakeCompressionBackend(MemoryType::kDevice, device);
    };
  }
}

absl::StatusOr<CompressionBackend*> BackendCompression::BackendFor(MemoryType type, int device) {
  if (type == MemoryType::kDevice && device < 0 && !said_no_device_) {
    said_no_device_ = true;
    if (log_ != nullptr) {
      GRAVAC_LOG(*log_, kWarning,
                 "device tensors without a known CUDA device (staged through host memory by "
                 "their workers) are compressed with the CPU kernels");
    }
  }
  if (type == MemoryType::kDevice && device >= 0) {
    auto it = devices_.find(device);
    if (it == devices_.end()) {
      absl::StatusOr<std::unique_ptr<CompressionBackend>> made = make_device_(device);
      if (log_ != nullptr && made.ok()) {
        GRAVAC_LOG(*log_, kInfo,
                   "GPU compression: CUDA device %d's tensors are compressed with the CUDA "
                   "kernels, their residuals in device memory",
                   device);
      } else if (log_ != nullptr) {
        GRAVAC_LOG(*log_, kWarning,
                   "CUDA device %d: %s; its tensors are compressed with the CPU kernels", device,
                   made.status().message());
      }
      it = devices_.emplace(device, made.ok() ? *std::move(made) : nullptr).first;
    }
    if (it->second != nullptr) return it->second.get();
  }
  if (host_ == nullptr) {
    ASSIGN_OR_RETURN(host_, kernels::MakeCompressionBackend(MemoryType::kHost, -1));
  }
  return host_.get();
}

absl::StatusOr<BackendCompression::Tensor*> BackendCompression::Find(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end() || it->second.step == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("tensor '%s': no error-feedback state on a compression backend", name));
  }
  return &it->second;
}

absl::StatusOr<BackendCompression::Tensor*> BackendCompression::StateFor(
    const TensorSpec& spec, int64_t n, CompressionBackend* backend) {
  Tensor& t = tensors_[spec.name];
  if (t.step == nullptr || t.backend != backend || t.step->size() != n) {
    t = Tensor{};  // the old state goes first
    absl::StatusOr<TopKStep> step = TopKStep::Create(backend, n);
    if (!step.ok()) {
      tensors_.erase(spec.name);
      return step.status();
    }
    t = Tensor{backend, std::make_unique<TopKStep>(*std::move(step))};
  }
  return &t;
}

absl::Status BackendCompression::Compensate(const TensorSpec& spec, int device,
                                            absl::Span<const float> g, double* grad_norm) {
  const int64_t n = Elements(spec.shape);
  RETURN_IF_ERROR(kernels::cpu::CheckSize(n, spec.name));
  if (static_cast<int64_t>(g.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': gradient has %d elements, shape %d", spec.name, g.size(), n));
  }
  ASSIGN_OR_RETURN(CompressionBackend * backend, BackendFor(spec.memory, device));
  ASSIGN_OR_RETURN(Tensor * t, StateFor(spec, n, backend));
  if (backend->memory_type() == MemoryType::kHost) {
    return t->step->Compensate(g.data(), grad_norm);
  }
  std::unique_ptr<kernels::BackendMemory>& stage = staging_[backend];
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (stage == nullptr || stage->bytes() < bytes) {
    stage.reset();
    ASSIGN_OR_RETURN(stage, backend->Allocate(bytes));
  }
  RETURN_IF_ERROR(backend->CopyFromHost(stage->data(), g.data(), bytes));
  RETURN_IF_ERROR(t->step->Compensate(stage->floats()));
  ASSIGN_OR_RETURN(const double sum_squares, backend->SumSquares(stage->floats(), n));
  *grad_norm = std::sqrt(sum_squares);
  return absl::OkStatus();
}

absl::StatusOr<bool> BackendCompression::CompensateFromDevice(const TensorSpec& spec,
                                                              const DeviceData& g,
                                                              double* grad_norm) {
  const int64_t n = Elements(spec.shape);
  RETURN_IF_ERROR(kernels::cpu::CheckSize(n, spec.name));
  if (g.bytes() != static_cast<size_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': %d bytes of device data for %d elements", spec.name, g.bytes(), n));
  }
  ASSIGN_OR_RETURN(CompressionBackend * backend, BackendFor(MemoryType::kDevice, g.device()));
  if (backend->memory_type() == MemoryType::kHost) return false;
  ASSIGN_OR_RETURN(Tensor * t, StateFor(spec, n, backend));
  const auto* floats = static_cast<const float*>(g.data());
  absl::StatusOr<double> sum_squares = 0.0;
  if (absl::Status s = t->step->Compensate(floats); !s.ok()) {
    sum_squares = s;
  } else {
    sum_squares = backend->SumSquares(floats, n);
  }
  if (!sum_squares.ok()) {
    // g is the local side's pooled buffer (device_data.h), reused once the caller releases it:
    // no kernel queued above may still read it then. (SumSquares synchronises when it works.)
    backend->Synchronize().IgnoreError();
    return sum_squares.status();
  }
  *grad_norm = std::sqrt(*sum_squares);
  return true;
}

bool BackendCompression::LevelsOnDevice(const std::string& name) const {
  auto it = tensors_.find(name);
  return it != tensors_.end() && it->second.step != nullptr &&
         it->second.backend->memory_type() != MemoryType::kHost;
}

absl::Status BackendCompression::Select(const std::string& name, Level level, double theta,
                                        kernels::Compressed* out) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  const int64_t n = t->step->size();
  RETURN_IF_ERROR(kernels::cpu::CheckCompressArgs(n, theta, name));
  if (absl::Status s = t->step->Select(level, kernels::KeepCount(n, theta)); !s.ok()) {
    // The backends do not know the tensor's name: a non-finite p gets the topk compressor's
    // message from the host copy (p = g + e is non-finite exactly where g is).
    std::vector<float> p(static_cast<size_t>(n));
    if (t->backend->CopyToHost(p.data(), t->step->p(), p.size() * sizeof(float)).ok()) {
      RETURN_IF_ERROR(kernels::cpu::CheckInput(p, name, nullptr));
    }
    return absl::Status(s.code(), absl::StrFormat("tensor '%s': %s", name, s.message()));
  }
  if (out == nullptr) return absl::OkStatus();
  return CopyMessage(name, level, out);
}

absl::Status BackendCompression::CopyMessage(const std::string& name, Level level,
                                             kernels::Compressed* out) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  kernels::cpu::PrepareSparseOutput(t->step->size(), kernels::ValueType::kFloat32, out);
  const TopKStep::Message m = level == Level::kMin ? t->step->at_min() : t->step->at_candidate();
  out->indices.resize(static_cast<size_t>(m.count));
  out->values.resize(static_cast<size_t>(m.count));
  RETURN_IF_ERROR(
      t->backend->CopyToHost(out->indices.data(), m.indices, m.count * sizeof(int32_t)));
  return t->backend->CopyToHost(out->values.data(), m.values, m.count * sizeof(float));
}

absl::StatusOr<kernels::CompressedView> BackendCompression::HostMessage(const std::string& name,
                                                                        Level level) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  if (t->backend->memory_type() != MemoryType::kHost) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s': its messages are in %s memory, not host memory", name, t->backend->name()));
  }
  const TopKStep::Message m = level == Level::kMin ? t->step->at_min() : t->step->at_candidate();
  const auto count = static_cast<size_t>(m.count);
  return kernels::CompressedView{.dense_size = t->step->size(),
                                 .value_type = kernels::ValueType::kFloat32,
                                 .indices = absl::MakeConstSpan(m.indices, count),
                                 .values = absl::MakeConstSpan(m.values, count)};
}

absl::Status BackendCompression::CandidateFromMin(const std::string& name, double theta_c,
                                                  kernels::Compressed* out) {
  ASSIGN_OR_RETURN(const kernels::CompressedView at_min, HostMessage(name, Level::kMin));
  return kernels::cpu::SelectFrom(at_min, theta_c, {name}, out);
}

absl::StatusOr<double> BackendCompression::Norm(const std::string& name, Level level) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  const TopKStep::Message m = level == Level::kMin ? t->step->at_min() : t->step->at_candidate();
  if (t->backend->memory_type() == MemoryType::kHost) {
    return kernels::L2Norm(absl::MakeConstSpan(m.values, static_cast<size_t>(m.count)));
  }
  ASSIGN_OR_RETURN(const double sum_squares, t->backend->SumSquares(m.values, m.count));
  return std::sqrt(sum_squares);
}

absl::Status BackendCompression::Commit(const std::string& name, Level sent) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  return t->step->Commit(sent);
}

absl::Status BackendCompression::CommitDense(const std::string& name) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  return t->step->CommitDense();
}

absl::Status BackendCompression::CopyP(const std::string& name, void* out, size_t bytes) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  if (bytes != static_cast<size_t>(t->step->size()) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': p has %d elements, the buffer %d bytes", name, t->step->size(), bytes));
  }
  return t->backend->CopyToHost(out, t->step->p(), bytes);
}

kernels::CompressionBackend* BackendCompression::DeviceBackend(int device) {
  if (device < 0) return nullptr;
  absl::StatusOr<CompressionBackend*> b = BackendFor(MemoryType::kDevice, device);
  if (!b.ok() || (*b)->memory_type() != MemoryType::kDevice) return nullptr;
  return *b;
}

absl::StatusOr<kernels::CompressionBackend*> BackendCompression::TensorBackend(
    const std::string& name) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  return t->backend;
}

absl::StatusOr<const float*> BackendCompression::P(const std::string& name) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  return t->step->p();
}

absl::StatusOr<kernels::TopKStep::Message> BackendCompression::Message(const std::string& name,
                                                                       Level level) {
  ASSIGN_OR_RETURN(Tensor * t, Find(name));
  return level == Level::kMin ? t->step->at_min() : t->step->at_candidate();
}

std::vector<float> BackendCompression::Residual(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end() || it->second.step == nullptr) return {};
  const TopKStep& step = *it->second.step;
  std::vector<float> e(static_cast<size_t>(step.size()));
  if (!it->second.backend->CopyToHost(e.data(), step.residual(), e.size() * sizeof(float)).ok()) {
    return {};
  }
  return e;
}

std::string_view BackendCompression::BackendOf(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end() || it->second.step == nullptr) return {};
  return it->second.backend->name();
}

}  // namespace gravac::daemon::internal

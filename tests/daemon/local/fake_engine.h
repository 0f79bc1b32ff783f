// FakeEngine: a NodeTensorSink for tests of the local side without the cross-node engine, on a
// single node: allreduce returns the node sum (divided by the world size for average),
// allgather and broadcast return the node tensor as is. It can hold tensors until Release() (to
// test polling and many tensors in flight) and records what it received. With
// set_device_results, an allreduce whose workers' device is known (NodeTensor::device) gets its
// result as the engine's device step hands it: in "device memory" (TensorResult::device_data, a
// host array of its own here), `data` empty; its copies to the host are counted.
//
// Thread-safety: all methods are thread-safe.
#ifndef GRAVAC_TESTS_DAEMON_LOCAL_FAKE_ENGINE_H_
#define GRAVAC_TESTS_DAEMON_LOCAL_FAKE_ENGINE_H_

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/mutex.h"
#include "daemon/collectives/reduce.h"
#include "daemon/engine/types.h"
#include "daemon/local/worker_server.h"

namespace gravac::daemon::testing {

// A result in "device memory" of `device` (a host array of its own); CopyToHost counts in
// `copies`.
class FakeResultData : public DeviceData {
 public:
  FakeResultData(int device, std::vector<uint8_t> bytes, std::shared_ptr<std::atomic<int>> copies)
      : device_(device), bytes_(std::move(bytes)), copies_(std::move(copies)) {}
  int device() const override { return device_; }
  const void* data() const override { return bytes_.data(); }
  size_t bytes() const override { return bytes_.size(); }
  absl::Status CopyToHost(void* host) const override {
    ++*copies_;
    if (!bytes_.empty()) std::memcpy(host, bytes_.data(), bytes_.size());
    return absl::OkStatus();
  }

 private:
  int device_;
  std::vector<uint8_t> bytes_;
  std::shared_ptr<std::atomic<int>> copies_;
};

class FakeEngine {
 public:
  explicit FakeEngine(int world_size) : world_size_(world_size) {}

  NodeTensorSink Sink() {
    return [this](NodeTensor t, DoneCallback done) { Enqueue(std::move(t), std::move(done)); };
  }
  FailureSink OnFailure() {
    return [this](absl::Status s) {
      MutexLock lock(&mu_);
      failures_.push_back(std::move(s));
    };
  }

  void Enqueue(NodeTensor t, DoneCallback done) {
    if (!t.local_status.ok()) {  // as the engine: fail it with the node's own message
      {
        MutexLock lock(&mu_);
        local_failed_.push_back(t.spec.name);
      }
      TensorResult r;
      r.status = t.local_status;
      done(std::move(r));
      return;
    }
    {
      MutexLock lock(&mu_);
      names_.push_back(t.spec.name);
      specs_.push_back(t.spec);
      devices_.push_back(t.device);
      if (t.device_data != nullptr) ++device_sums_;
      if (hold_) {
        held_.emplace_back(std::move(t), std::move(done));
        return;
      }
    }
    done(Complete(std::move(t)));
  }

  void set_device_results(bool on) {
    MutexLock lock(&mu_);
    device_results_ = on;
  }
  // Results handed in device memory so far, and their copies to the host (ResultHostData).
  int device_results() const { return *device_results_made_; }
  int result_host_copies() const { return *result_host_copies_; }

  void set_hold(bool hold) {
    MutexLock lock(&mu_);
    hold_ = hold;
  }
  // Completes every held tensor (with `status` when not OK).
  void Release(absl::Status status = absl::OkStatus()) {
    std::vector<std::pair<NodeTensor, DoneCallback>> held;
    {
      MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (auto& [t, done] : held) {
      if (status.ok()) {
        done(Complete(std::move(t)));
      } else {
        TensorResult r;
        r.status = status;
        done(std::move(r));
      }
    }
  }
  size_t held() {
    MutexLock lock(&mu_);
    return held_.size();
  }
  // Tensors that arrived marked failed by the local side (local_status not OK).
  std::vector<std::string> local_failed() {
    MutexLock lock(&mu_);
    return local_failed_;
  }
  std::vector<std::string> names() {
    MutexLock lock(&mu_);
    return names_;
  }
  std::vector<TensorSpec> specs() {
    MutexLock lock(&mu_);
    return specs_;
  }
  // NodeTensor::device of each tensor enqueued, in order (as specs()).
  // Tensors handed over with their sum in device memory (NodeTensor::device_data).
  int device_sums() {
    MutexLock lock(&mu_);
    return device_sums_;
  }
  std::vector<int> devices() {
    MutexLock lock(&mu_);
    return devices_;
  }
  std::vector<absl::Status> failures() {
    MutexLock lock(&mu_);
    return failures_;
  }

  TensorResult Complete(NodeTensor t) const {
    TensorResult r;
    if (t.device_data != nullptr) {  // as the engine's host paths: the sum copied out once
      t.data.resize(t.device_data->bytes());
      r.status = t.device_data->CopyToHost(t.data.data());
      if (!r.status.ok()) return r;
    }
    r.decision_epoch = 7;
    r.theta = 1.0;
    switch (t.spec.kind) {
      case CollectiveKind::kAllreduce:
        if (t.spec.reduce_op == collectives::ReduceOp::kAverage && !t.data.empty()) {
          collectives::DivideInPlace(t.spec.dtype, t.data.data(),
                                     t.data.size() / collectives::DataTypeSize(t.spec.dtype),
                                     world_size_);
        }
        r.collective = "dense_allreduce";
        break;
      case CollectiveKind::kAllgather:
        r.first_dims = t.first_dims;
        r.collective = "allgather";
        break;
      case CollectiveKind::kBroadcast:
        r.collective = "broadcast";
        break;
      case CollectiveKind::kJoin:  // one node: its own last joined rank (the data already)
        r.collective = "join";
        break;
    }
    bool on_device = false;
    {
      MutexLock lock(&mu_);
      on_device = device_results_ && t.spec.kind == CollectiveKind::kAllreduce && t.device >= 0;
    }
    if (on_device) {
      ++*device_results_made_;
      r.device_data =
          std::make_shared<FakeResultData>(t.device, std::move(t.data), result_host_copies_);
      return r;
    }
    r.data = std::move(t.data);
    return r;
  }

 private:
  const int world_size_;
  const std::shared_ptr<std::atomic<int>> device_results_made_ =
      std::make_shared<std::atomic<int>>(0);
  const std::shared_ptr<std::atomic<int>> result_host_copies_ =
      std::make_shared<std::atomic<int>>(0);
  mutable Mutex mu_;
  bool device_results_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<NodeTensor, DoneCallback>> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> local_failed_ ABSL_GUARDED_BY(mu_);
  std::vector<TensorSpec> specs_ ABSL_GUARDED_BY(mu_);
  std::vector<int> devices_ ABSL_GUARDED_BY(mu_);
  int device_sums_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Status> failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_LOCAL_FAKE_ENGINE_H_

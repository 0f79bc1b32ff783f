// WorkerServerImpl: device buffers handed over by CUDA IPC (server thread).
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/local/device_posts.h"
#include "daemon/local/worker_server_impl.h"

namespace gravac::daemon::internal {

void WorkerServerImpl::HandleMapDevice(Conn& conn, const v1::MapDevice& map) {
  v1::DaemonMessage msg;
  v1::Response* r = msg.mutable_response();
  r->set_id(map.id());
  auto answer = [&](const absl::Status& status) {
    r->set_code(static_cast<int>(status.code()));
    r->set_message(std::string(status.message()));
    Send(conn, msg);
  };
  if (intake_ == nullptr) {
    // The Welcome said so; a worker asking anyway stages.
    r->set_stage(true);
    return answer(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: this gravacd maps no CUDA IPC handles (built without CUDA or no usable device)",
        conn.rank)));
  }
  auto e = ExportFromProto(map.buffer(), conn.rank, "");
  if (!e.ok()) return answer(e.status());
  auto taken = intake_->Take(conn.local_rank, *e);
  if (!taken.ok()) return answer(taken.status());
  if (taken->staged) {
    r->set_stage(true);
    return answer(absl::FailedPreconditionError(
        absl::StrFormat("rank %d: %s", conn.rank, taken->reason)));
  }
  if (options_.log != nullptr) {
    GRAVAC_LOG(*options_.log, kInfo,
               "rank %d: CUDA IPC handoff: mapped an allocation of %d bytes on device %d (%d "
               "mappings open, %d opened in all)",
               conn.rank, e->allocation_bytes, e->device, intake_->cache().size(),
               intake_->cache().opens());
  }
  answer(absl::OkStatus());
}

void WorkerServerImpl::TakeDevicePost(Conn& conn, const v1::Request& request,
                                      PostedRequest* post) {
  post->on_device = true;
  const v1::DeviceBuffer& b = request.device_buffer();
  post->device = b.device();
  post->ready_event = b.ready_event();
  post->done_event = b.done_event();
  if (intake_ == nullptr) {
    post->device_status = absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s', field device_buffer: this gravacd maps no CUDA IPC handles (its "
        "Welcome said so); stage the tensor through host memory",
        conn.rank, request.name()));
    return;
  }
  post->device_status = CheckDeviceRequest(request, conn.rank, conn.device);
  if (!post->device_status.ok()) return;
  auto e = ExportFromProto(b, conn.rank, request.name());
  if (!e.ok()) {
    post->device_status = e.status();
    return;
  }
  auto mapped = intake_->Map(conn.local_rank, *e);
  if (!mapped.ok()) {
    post->device_status = absl::Status(
        mapped.status().code(),
        absl::StrFormat("rank %d, tensor '%s', field device_buffer: %s (a freed or foreign CUDA "
                        "IPC handle)",
                        conn.rank, request.name(), mapped.status().message()));
    return;
  }
  post->mapped = mapped->data;
  post->pin = std::move(mapped->pin);
  if (conn.device < 0) conn.device = b.device();
}

absl::Status WorkerServerImpl::ReadDevicePosts(const std::string& name, Pending& pending) {
  for (size_t lr = 0; lr < pending.posts.size(); ++lr) {
    if (!pending.posts[lr].has_value() || !pending.posts[lr]->on_device) continue;
    PostedRequest& post = *pending.posts[lr];
    if (!post.device_status.ok()) return post.device_status;
    post.host.resize(post.bytes);
    absl::Status read = options_.device->Read(post.host.data(), post.mapped, post.bytes,
                                              post.device, post.ready_event);
    if (!read.ok()) {
      return absl::Status(read.code(),
                          absl::StrFormat("rank %d, tensor '%s', field device_buffer: reading it "
                                          "failed: %s",
                                          first_rank_ + static_cast<int>(lr), name,
                                          read.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const DeviceData>> WorkerServerImpl::ReduceDevicePosts(
    const std::string& name, const Pending& pending) {
  if (options_.device_reduce == nullptr || options_.check_finite || pending.join) return nullptr;
  std::vector<const PostedRequest*> posts;
  for (const std::optional<PostedRequest>& post : pending.posts) {
    if (!post.has_value()) continue;  // a joined rank: its zeros need no device
    if (!post->on_device || post->spec.kind != CollectiveKind::kAllreduce ||
        post->spec.dtype != collectives::DataType::kFloat32) {
      return nullptr;
    }
    if (!post->device_status.ok()) return post->device_status;
    if (!posts.empty() && (post->device != posts[0]->device || post->bytes != posts[0]->bytes)) {
      return nullptr;  // reduced on the host, where a disagreement is named
    }
    posts.push_back(&*post);
  }
  if (posts.empty()) return nullptr;
  const int device = posts[0]->device;
  if (absl::Status usable = options_.device_reduce->Prepare(device); !usable.ok()) {
    if (options_.log != nullptr && !said_no_device_reduce_) {
      GRAVAC_LOG(*options_.log, kWarning, "%s; device tensors are reduced in host memory",
                 usable.message());
    }
    said_no_device_reduce_ = true;
    return nullptr;
  }
  std::vector<const void*> inputs;
  for (size_t lr = 0; lr < pending.posts.size(); ++lr) {
    if (!pending.posts[lr].has_value()) continue;
    const PostedRequest& post = *pending.posts[lr];
    absl::Status ready = options_.device->WaitReady(post.device, post.ready_event);
    if (!ready.ok()) {
      return absl::Status(ready.code(),
                          absl::StrFormat("rank %d, tensor '%s', field device_buffer: waiting for "
                                          "its ready event failed: %s",
                                          first_rank_ + static_cast<int>(lr), name,
                                          ready.message()));
    }
    inputs.push_back(post.mapped);
  }
  absl::StatusOr<std::shared_ptr<const DeviceData>> sum =
      options_.device_reduce->SumFloat32(device, inputs, posts[0]->bytes);
  if (sum.ok()) return sum;
  return absl::Status(sum.status().code(),
                      absl::StrFormat("tensor '%s': %s", name, sum.status().message()));
}

absl::Status WorkerServerImpl::WriteDevicePost(const Conn& conn, const std::string& name,
                                               const PostedRequest& post, TensorResult& result) {
  if (result.device_data != nullptr && result.device_data->device() == post.device) {
    absl::Status written = options_.device->WriteFromDevice(
        post.mapped, result.device_data->data(), post.bytes, post.device, post.done_event);
    if (written.ok()) return written;
    return absl::Status(written.code(),
                        absl::StrFormat("rank %d, tensor '%s', field device_buffer: writing the "
                                        "result from CUDA device %d memory failed: %s",
                                        conn.rank, name, post.device, written.message()));
  }
  if (absl::Status host = ResultHostData(result); !host.ok()) {
    return absl::Status(
        host.code(),
        absl::StrFormat("rank %d, tensor '%s', field device_buffer: copying the "
                        "result from CUDA device %d to host memory failed: %s",
                        conn.rank, name, result.device_data->device(), host.message()));
  }
  absl::Status written = options_.device->Write(post.mapped, result.data.data(), post.bytes,
                                                post.device, post.done_event);
  if (written.ok()) return written;
  return absl::Status(written.code(),
                      absl::StrFormat("rank %d, tensor '%s', field device_buffer: writing the "
                                      "result failed: %s",
                                      conn.rank, name, written.message()));
}

}  // namespace gravac::daemon::internal

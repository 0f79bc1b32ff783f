#include "daemon/local/local_reduce.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/engine/spec_agreement.h"

namespace gravac::daemon {
namespace {

using collectives::DataType;

absl::StatusOr<DataType> DataTypeFromProto(v1::DataType dtype) {
  static constexpr std::pair<v1::DataType, DataType> kTypes[] = {
      {v1::FLOAT32, DataType::kFloat32}, {v1::FLOAT64, DataType::kFloat64},
      {v1::FLOAT16, DataType::kFloat16}, {v1::BFLOAT16, DataType::kBFloat16},
      {v1::INT32, DataType::kInt32},     {v1::INT64, DataType::kInt64},
      {v1::UINT8, DataType::kUInt8},
  };
  for (const auto& [proto, type] : kTypes) {
    if (proto == dtype) return type;
  }
  return absl::InvalidArgumentError(absl::StrFormat("unknown dtype %d", dtype));
}

uint64_t Elements(absl::Span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// Whether `shape` of `element_bytes` elements fits in 2^63 bytes (so TensorBytes is exact).
bool BytesFit(absl::Span<const int64_t> shape, uint64_t element_bytes) {
  uint64_t n = element_bytes;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  return n <= (uint64_t{1} << 63);
}

}  // namespace

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrFormat("[%s]", absl::StrJoin(shape, ", "));
}

uint64_t TensorBytes(const TensorSpec& spec) {
  return Elements(spec.shape) * collectives::DataTypeSize(spec.dtype);
}

absl::StatusOr<TensorSpec> SpecFromRequest(const v1::Request& request, int rank) {
  TensorSpec spec;
  spec.name = request.name();
  auto fail = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d, tensor '%s': %s", rank, spec.name, what));
  };
  if (spec.name.empty()) return fail("empty tensor name");
  switch (request.kind()) {
    case v1::ALLREDUCE:
      spec.kind = CollectiveKind::kAllreduce;
      break;
    case v1::ALLGATHER:
      spec.kind = CollectiveKind::kAllgather;
      break;
    case v1::BROADCAST:
      spec.kind = CollectiveKind::kBroadcast;
      break;
    case v1::JOIN:
      spec.kind = CollectiveKind::kJoin;
      break;
    default:
      return fail(absl::StrFormat("unknown collective kind %d", request.kind()));
  }
  auto dtype = DataTypeFromProto(request.dtype());
  if (!dtype.ok()) return fail(std::string(dtype.status().message()));
  spec.dtype = *dtype;
  spec.shape.assign(request.shape().begin(), request.shape().end());
  for (int64_t d : spec.shape) {
    if (d < 0)
      return fail(absl::StrFormat("negative dimension in shape %s", ShapeString(spec.shape)));
  }
  if (spec.kind == CollectiveKind::kAllgather && spec.shape.empty()) {
    return fail("allgather needs at least one dimension");
  }
  switch (request.reduce_op()) {
    case v1::SUM:
      spec.reduce_op = collectives::ReduceOp::kSum;
      break;
    case v1::AVERAGE:
      spec.reduce_op = collectives::ReduceOp::kAverage;
      break;
    default:
      return fail(absl::StrFormat("unknown reduce op %d", request.reduce_op()));
  }
  if (spec.kind == CollectiveKind::kJoin &&
      (spec.dtype != DataType::kInt32 || !spec.shape.empty())) {
    return fail("join must be an int32 scalar (it returns the last joined rank)");
  }
  spec.process_set.assign(request.process_set().begin(), request.process_set().end());
  spec.root_rank = request.root_rank();
  spec.compress = request.compress();
  switch (request.memory()) {
    case v1::HOST_MEMORY:
      spec.memory = MemoryType::kHost;
      break;
    case v1::DEVICE_MEMORY:
      spec.memory = MemoryType::kDevice;
      break;
    default:
      return fail(absl::StrFormat("field memory: unknown memory type %d", request.memory()));
  }
  spec.step = request.step();
  spec.samples = request.samples();
  // A shape whose byte count wraps around could match a small posted size (e.g. [2^62, 4] of
  // float32 "is" 0 bytes) and be trusted downstream.
  if (!BytesFit(spec.shape, collectives::DataTypeSize(spec.dtype))) {
    return fail(absl::StrFormat("shape %s of %s holds more than 2^63 bytes",
                                ShapeString(spec.shape), collectives::DataTypeName(spec.dtype)));
  }
  if (TensorBytes(spec) != request.bytes()) {
    return fail(absl::StrFormat("%d bytes posted for shape %s of %s (%d bytes expected)",
                                request.bytes(), ShapeString(spec.shape),
                                collectives::DataTypeName(spec.dtype), TensorBytes(spec)));
  }
  return spec;
}

absl::Status CheckProcessSet(TensorSpec* spec, int rank, int world_size) {
  std::vector<int>& set = spec->process_set;
  if (set.empty()) return absl::OkStatus();
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d, tensor '%s': process_set [%s]: %s", rank, spec->name, absl::StrJoin(set, ", "),
        what));
  };
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i] < 0 || set[i] >= world_size) {
      return fail(absl::StrFormat("rank %d is not a rank of the job (size %d)", set[i],
                                  world_size));
    }
    if (i > 0 && set[i] == set[i - 1]) return fail(absl::StrFormat("names rank %d twice", set[i]));
    if (i > 0 && set[i] < set[i - 1]) return fail("ranks must be in ascending order");
  }
  if (!std::binary_search(set.begin(), set.end(), rank)) {
    return fail(absl::StrFormat("rank %d is not in this process set (a collective runs only on "
                                "the ranks of its set)",
                                rank));
  }
  if (spec->kind == CollectiveKind::kBroadcast &&
      !std::binary_search(set.begin(), set.end(), spec->root_rank)) {
    return fail(absl::StrFormat("root_rank %d is not in the process set", spec->root_rank));
  }
  if (spec->kind == CollectiveKind::kJoin) {
    return fail("join runs on every rank of the job (the global process set)");
  }
  if (spec->compress && static_cast<int>(set.size()) < world_size) {
    return fail("compression runs on the global process set only; send it uncompressed");
  }
  if (static_cast<int>(set.size()) == world_size) set.clear();
  return absl::OkStatus();
}

bool InProcessSet(const TensorSpec& spec, int rank) {
  return spec.process_set.empty() ||
         std::binary_search(spec.process_set.begin(), spec.process_set.end(), rank);
}

std::string JoinedRanksAnswer(const TensorSpec& spec, absl::Span<const int> joined,
                              absl::Span<const int> never_posted) {
  if (joined.empty()) return "";
  if (spec.kind != CollectiveKind::kAllreduce) {
    return absl::StrFormat(
        "tensor '%s': %s while ranks [%s] have joined (hvd.join); after a join only allreduce "
        "runs, with zeros from the joined ranks (as Horovod)",
        spec.name, CollectiveKindName(spec.kind), absl::StrJoin(joined, ", "));
  }
  if (never_posted.empty()) return "";
  return absl::StrFormat(
      "tensor '%s': ranks [%s] have joined (hvd.join) and never posted it, so they cannot "
      "contribute zeros to it (a joined rank answers only for allreduce names it posted before "
      "joining)",
      spec.name, absl::StrJoin(never_posted, ", "));
}

absl::Status CheckLocalAgreement(absl::Span<const LocalInput> inputs) {
  if (inputs.size() < 2) return absl::OkStatus();
  std::vector<const TensorSpec*> specs;
  for (const LocalInput& in : inputs) specs.push_back(in.spec);
  const std::string error = FindDisagreement(
      inputs[0].spec->name, specs, [&](int i) { return std::vector<int>{inputs[i].rank}; });
  if (error.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(error);
}

std::vector<uint8_t> BufferPool::Take(size_t bytes) {
  auto it = by_capacity_.lower_bound(bytes);
  // Only a buffer of about the right size (at most twice) is worth handing out.
  if (it == by_capacity_.end() || it->first > 2 * bytes + kMinPooledBytes) return {};
  std::vector<uint8_t> buffer = std::move(it->second.back());
  it->second.pop_back();
  pooled_bytes_ -= it->first;
  if (it->second.empty()) by_capacity_.erase(it);
  return buffer;
}

void BufferPool::Give(std::vector<uint8_t> buffer) {
  const size_t capacity = buffer.capacity();
  if (capacity < kMinPooledBytes || pooled_bytes_ + capacity > kMaxPooledBytes) return;
  auto& list = by_capacity_[capacity];
  if (list.size() >= kMaxPerSize) return;
  list.push_back(std::move(buffer));  // with its size: CombineLocal can resize without a fill
  pooled_bytes_ += capacity;
}

NodeTensor CombineLocal(absl::Span<const LocalInput> inputs, int64_t posted_at_ns,
                        std::vector<uint8_t> storage) {
  NodeTensor out;
  out.data = std::move(storage);
  out.spec = *inputs[0].spec;
  out.posted_at_ns = posted_at_ns;
  out.spec.samples = 0;
  for (const LocalInput& in : inputs) out.samples += in.spec->samples;
  out.spec.samples = out.samples;
  switch (out.spec.kind) {
    case CollectiveKind::kAllreduce: {
      if (inputs.size() == 1) {
        out.data.assign(inputs[0].data, inputs[0].data + inputs[0].bytes);
        break;
      }
      // One pass for the first two inputs (no copy of the first). A pooled buffer keeps its old
      // size, so this resize fills nothing when it shrinks; the sum writes every byte.
      out.data.resize(inputs[0].bytes);
      const size_t count = inputs[0].bytes / collectives::DataTypeSize(out.spec.dtype);
      collectives::ReduceSum(out.spec.dtype, out.data.data(), inputs[0].data, inputs[1].data,
                             count);
      for (size_t i = 2; i < inputs.size(); ++i) {
        collectives::ReduceSumInto(out.spec.dtype, out.data.data(), inputs[i].data, count);
      }
      break;
    }
    case CollectiveKind::kAllgather: {
      out.data.clear();
      uint64_t total = 0;
      for (const LocalInput& in : inputs) total += in.bytes;
      out.data.reserve(total);  // no-op when the pooled storage is large enough
      for (const LocalInput& in : inputs) {
        out.data.insert(out.data.end(), in.data, in.data + in.bytes);
        out.first_dims.push_back(in.spec->shape[0]);
      }
      // The node's block: first dimension = the local sum.
      int64_t first = 0;
      for (int64_t d : out.first_dims) first += d;
      out.spec.shape[0] = first;
      break;
    }
    case CollectiveKind::kBroadcast: {
      const LocalInput* root = nullptr;
      for (const LocalInput& in : inputs) {
        if (in.rank == out.spec.root_rank) root = &in;
      }
      if (root != nullptr) {
        out.data.assign(root->data, root->data + root->bytes);
      } else {
        out.data.assign(inputs[0].bytes, 0);
      }
      break;
    }
    case CollectiveKind::kJoin:  // the local side builds the node's join itself
      out.data.assign(inputs[0].data, inputs[0].data + inputs[0].bytes);
      break;
  }
  return out;
}

}  // namespace gravac::daemon

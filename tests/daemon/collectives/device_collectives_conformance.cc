#include "tests/daemon/collectives/device_collectives_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/status.h"

namespace gravac::collectives::conformance {

absl::StatusOr<void*> HostBufferOps::Alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::malloc(bytes);
  if (p == nullptr) return absl::ResourceExhaustedError("malloc failed");
  return p;
}
void HostBufferOps::Free(void* buffer) { std::free(buffer); }
absl::Status HostBufferOps::CopyIn(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
  return absl::OkStatus();
}
absl::Status HostBufferOps::CopyOut(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
  return absl::OkStatus();
}

namespace {

// A buffer of the implementation's memory, freed at scope exit.
class Buffer {
 public:
  Buffer(BufferOps& mem, size_t bytes) : mem_(mem) {
    absl::StatusOr<void*> p = mem.Alloc(bytes);
    status_ = p.status();
    if (p.ok()) data_ = *p;
  }
  ~Buffer() {
    if (data_ != nullptr) mem_.Free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }
  const absl::Status& status() const { return status_; }

 private:
  BufferOps& mem_;
  void* data_ = nullptr;
  absl::Status status_;
};

int IntValue(int rank, size_t i) { return static_cast<int>((i * 7 + rank * 3) % 11) - 5; }

// Values of varied magnitude, so that the order of the additions shows in the result.
std::vector<float> RandomFloats(int rank, size_t count) {
  std::mt19937 gen(static_cast<uint32_t>(rank * 7919 + count));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  std::vector<float> v(count);
  for (float& x : v) x = std::ldexp(unit(gen), exponent(gen));
  return v;
}

// The host ring's order: element i lies in segment k (count split in p, the first count % p
// segments one longer) and is summed from rank k rightwards (communicator.h).
float RingOrderSum(const std::vector<std::vector<float>>& in, size_t i) {
  const size_t p = in.size(), count = in[0].size();
  const size_t base = count / p, extra = count % p;
  size_t k = 0;
  while (k + 1 < p && (k + 1) * base + std::min(k + 1, extra) <= i) ++k;
  float acc = in[k][i];
  for (size_t j = 1; j < p; ++j) acc += in[(k + j) % p][i];
  return acc;
}

uint64_t Fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

absl::Status Where(absl::Status s, const std::string& what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// In-place sum of `input` through the implementation; the result in host memory.
absl::StatusOr<std::vector<float>> Sum(CaseEnv& env, const std::vector<float>& input) {
  const size_t bytes = input.size() * sizeof(float);
  Buffer buf(env.mem, bytes);
  RETURN_IF_ERROR(buf.status());
  RETURN_IF_ERROR(env.mem.CopyIn(buf.data(), input.data(), bytes));
  RETURN_IF_ERROR(env.dc.AllreduceSum(static_cast<float*>(buf.data()), input.size()));
  RETURN_IF_ERROR(env.dc.Wait(env.bound));
  std::vector<float> out(input.size());
  RETURN_IF_ERROR(env.mem.CopyOut(out.data(), buf.data(), bytes));
  return out;
}

absl::Status ExactIntegerSums(CaseEnv& env) {
  const int p = env.dc.size(), rank = env.dc.rank();
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(p + 1), size_t{100003}}) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(IntValue(rank, i));
    absl::StatusOr<std::vector<float>> out = Sum(env, in);
    RETURN_IF_ERROR(Where(out.status(), absl::StrCat("count ", count)));
    for (size_t i = 0; i < count; ++i) {
      int want = 0;
      for (int r = 0; r < p; ++r) want += IntValue(r, i);
      if ((*out)[i] != static_cast<float>(want)) {
        return absl::InternalError(
            absl::StrFormat("count %d: element %d is %g, want %d", count, i, (*out)[i], want));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RandomFloatSums(CaseEnv& env) {
  const int p = env.dc.size(), rank = env.dc.rank();
  for (size_t count : {size_t{1000}, size_t{65537}}) {
    std::vector<std::vector<float>> all;
    for (int r = 0; r < p; ++r) all.push_back(RandomFloats(r, count));
    absl::StatusOr<std::vector<float>> out = Sum(env, all[rank]);
    RETURN_IF_ERROR(Where(out.status(), absl::StrCat("count ", count)));
    for (size_t i = 0; i < count; ++i) {
      const float got = (*out)[i];
      if (env.order == SumOrder::kHostRing) {
        const float want = RingOrderSum(all, i);
        if (std::memcmp(&got, &want, sizeof(float)) != 0) {
          return absl::InternalError(absl::StrFormat(
              "count %d: element %d is %a, the ring's order gives %a", count, i, got, want));
        }
      } else {
        double serial = 0, magnitude = 0;
        for (int r = 0; r < p; ++r) {
          serial += all[r][i];
          magnitude += std::fabs(all[r][i]);
        }
        if (std::fabs(got - serial) > p * std::ldexp(magnitude, -23)) {
          return absl::InternalError(
              absl::StrFormat("count %d: element %d is %g, the serial sum %g (beyond %d ulps)",
                              count, i, got, serial, p));
        }
      }
    }
    if (env.order == SumOrder::kHostRing) {
      // Every rank the same bits: the hashes travel as "sizes".
      const uint64_t mine = Fnv1a(out->data(), count * sizeof(float));
      absl::StatusOr<std::vector<size_t>> hashes = env.dc.AgreeSizes(mine, env.bound);
      RETURN_IF_ERROR(Where(hashes.status(), "exchanging result hashes"));
      for (int r = 0; r < p; ++r) {
        if ((*hashes)[r] != mine) {
          return absl::InternalError(
              absl::StrFormat("count %d: rank %d's result differs from this rank's", count, r));
        }
      }
    }
  }
  return absl::OkStatus();
}

size_t PayloadSize(int rank, int variant) {
  if (variant == 1) return 0;                    // all empty
  if (rank % 2 == 1) return 0;                   // odd ranks send nothing
  return static_cast<size_t>(rank * 4099 + 13);  // unequal, not multiples of 4 or 8
}
uint8_t PayloadByte(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + 1); }

// AgreeSizes then Allgatherv of every rank's payload, checked byte for byte.
absl::Status Gather(CaseEnv& env, int variant) {
  const int p = env.dc.size(), rank = env.dc.rank();
  const size_t mine = PayloadSize(rank, variant);
  absl::StatusOr<std::vector<size_t>> sizes = env.dc.AgreeSizes(mine, env.bound);
  RETURN_IF_ERROR(Where(sizes.status(), "agreeing sizes"));
  size_t total = 0;
  for (int r = 0; r < p; ++r) {
    if ((*sizes)[r] != PayloadSize(r, variant)) {
      return absl::InternalError(absl::StrFormat("rank %d's size agreed as %d, it sent %d", r,
                                                 (*sizes)[r], PayloadSize(r, variant)));
    }
    total += (*sizes)[r];
  }
  std::vector<uint8_t> payload(mine);
  for (size_t i = 0; i < mine; ++i) payload[i] = PayloadByte(rank, i);
  Buffer send(env.mem, mine), recv(env.mem, total);
  RETURN_IF_ERROR(send.status());
  RETURN_IF_ERROR(recv.status());
  RETURN_IF_ERROR(env.mem.CopyIn(send.data(), payload.data(), mine));
  RETURN_IF_ERROR(Where(env.dc.Allgatherv(send.data(), recv.data(), *sizes), "allgatherv"));
  RETURN_IF_ERROR(Where(env.dc.Wait(env.bound), "waiting for the allgatherv"));
  std::vector<uint8_t> got(total);
  RETURN_IF_ERROR(env.mem.CopyOut(got.data(), recv.data(), total));
  size_t offset = 0;
  for (int r = 0; r < p; ++r) {
    for (size_t i = 0; i < (*sizes)[r]; ++i) {
      if (got[offset + i] != PayloadByte(r, i)) {
        return absl::InternalError(absl::StrFormat("byte %d of rank %d's payload is %d, want %d", i,
                                                   r, got[offset + i], PayloadByte(r, i)));
      }
    }
    offset += (*sizes)[r];
  }
  return absl::OkStatus();
}

// A dense and a sparse step started back to back, one Wait for both.
absl::Status BackToBack(CaseEnv& env) {
  const int p = env.dc.size(), rank = env.dc.rank();
  constexpr size_t kCount = 4097;
  std::vector<float> in(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>(IntValue(rank, i));
  std::vector<size_t> sizes(p);
  size_t total = 0;
  for (int r = 0; r < p; ++r) total += sizes[r] = PayloadSize(r, 0);
  std::vector<uint8_t> payload(sizes[rank]);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = PayloadByte(rank, i);
  Buffer dense(env.mem, kCount * sizeof(float)), send(env.mem, payload.size()),
      recv(env.mem, total);
  RETURN_IF_ERROR(dense.status());
  RETURN_IF_ERROR(send.status());
  RETURN_IF_ERROR(recv.status());
  RETURN_IF_ERROR(env.mem.CopyIn(dense.data(), in.data(), kCount * sizeof(float)));
  RETURN_IF_ERROR(env.mem.CopyIn(send.data(), payload.data(), payload.size()));
  RETURN_IF_ERROR(env.dc.AllreduceSum(static_cast<float*>(dense.data()), kCount));
  RETURN_IF_ERROR(env.dc.Allgatherv(send.data(), recv.data(), sizes));
  RETURN_IF_ERROR(env.dc.AllreduceSum(static_cast<float*>(dense.data()), kCount));
  RETURN_IF_ERROR(env.dc.Wait(env.bound));
  std::vector<float> out(kCount);
  RETURN_IF_ERROR(env.mem.CopyOut(out.data(), dense.data(), kCount * sizeof(float)));
  for (size_t i = 0; i < kCount; ++i) {
    int sum = 0;
    for (int r = 0; r < p; ++r) sum += IntValue(r, i);
    if (out[i] != static_cast<float>(p * sum)) {
      return absl::InternalError(
          absl::StrFormat("element %d is %g after two sums, want %d", i, out[i], p * sum));
    }
  }
  std::vector<uint8_t> got(total);
  RETURN_IF_ERROR(env.mem.CopyOut(got.data(), recv.data(), total));
  size_t offset = sizes[0];
  for (int r = 1; r < p; offset += sizes[r], ++r) {
    if (sizes[r] > 0 && got[offset + sizes[r] - 1] != PayloadByte(r, sizes[r] - 1)) {
      return absl::InternalError(absl::StrFormat("rank %d's last payload byte is wrong", r));
    }
  }
  return absl::OkStatus();
}

// Run by every rank but the last, which never arrives.
absl::Status MissingPeer(CaseEnv& env) {
  const int rank = env.dc.rank(), absent = env.dc.size() - 1;
  constexpr size_t kCount = 1 << 16;
  Buffer buf(env.mem, kCount * sizeof(float));
  RETURN_IF_ERROR(buf.status());
  std::vector<float> ones(kCount, 1.0f);
  RETURN_IF_ERROR(env.mem.CopyIn(buf.data(), ones.data(), kCount * sizeof(float)));
  const absl::Time start = absl::Now();
  absl::Status s = env.dc.AllreduceSum(static_cast<float*>(buf.data()), kCount);
  if (s.ok()) s = env.dc.Wait(env.bound);
  const absl::Duration took = absl::Now() - start;
  if (s.ok())
    return absl::InternalError("the allreduce completed without rank " + std::to_string(absent));
  if (!absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s)) {
    return absl::InternalError("want DeadlineExceeded or Unavailable, got " + s.ToString());
  }
  const absl::Duration slack = absl::Seconds(5);
  if (took > env.bound + slack) {
    return absl::InternalError(
        absl::StrFormat("failed after %s, beyond the bound %s + %s", absl::FormatDuration(took),
                        absl::FormatDuration(env.bound), absl::FormatDuration(slack)));
  }
  const std::string msg(s.message());
  if (!absl::StrContains(msg, absl::StrCat("rank ", rank))) {
    return absl::InternalError("the error does not name this rank: " + msg);
  }
  // The host data plane names the silent peer (a neighbour on the ring, possibly a rank that
  // waits for the absent one); NCCL cannot and says so.
  if (!absl::StrContains(msg, "peer rank") && !absl::StrContains(msg, "does not say which")) {
    return absl::InternalError("the error names no peer: " + msg);
  }
  absl::Status later = env.dc.AllreduceSum(static_cast<float*>(buf.data()), kCount);
  if (!absl::IsFailedPrecondition(later) || env.dc.abort_status().ok()) {
    return absl::InternalError("a call after the failure did not fail as aborted: " +
                               later.ToString());
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<ConformanceCase> ConformanceCases() {
  return {
      {"ExactIntegerSums", ExactIntegerSums},
      {"RandomFloatSums", RandomFloatSums},
      {"UnequalPayloadsSomeEmpty", [](CaseEnv& env) { return Gather(env, 0); }},
      {"AllPayloadsEmpty", [](CaseEnv& env) { return Gather(env, 1); }},
      {"BackToBackUnderOneWait", BackToBack},
      {"MissingPeerFailsWithinTheBound", MissingPeer, /*missing_peer=*/true},
  };
}

}  // namespace gravac::collectives::conformance

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "core/cuda/cuda_status.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/select.h"

namespace gravac::kernels::cuda {
namespace {

using internal::DeviceState;
using internal::kNonFiniteKey;
using internal::Latch;
using internal::MagnitudeKey;

constexpr int kThreads = internal::kTileThreads;
constexpr int kItems = internal::kTileItems;
constexpr long long kTile = internal::kTileElements;
constexpr int kHistogramUnroll = 8;
constexpr int kFindThreads = 1024;
constexpr unsigned long long kAboveOne = 1ull << 32;
constexpr unsigned long long kLow = 0xffffffffull;

__device__ __forceinline__ long long MinLL(long long a, long long b) { return a < b ? a : b; }

__global__ void InitSelectKernel(DeviceState* st, long long k) {
  st->prefix = 0;
  st->remaining = k;
  st->key_threshold = 0;
  st->need = 0;
  st->totals = 0;
}

__global__ void SetCompactionKernel(DeviceState* st, unsigned int key_threshold, long long need) {
  st->key_threshold = key_threshold;
  st->need = need;
  st->totals = 0;
}

// One radix-select pass: a histogram of digit = (key >> shift) & (2^kBits - 1) over the keys
// whose bits above shift + kBits equal the prefix decided so far (all keys in the first pass,
// where shift + kBits = 31). Every block runs the same trip count so whole warps reach
// __match_any_sync, which merges equal digits of a warp into one shared-memory atomic.
template <int kBits>
__global__ void __launch_bounds__(kThreads)
    HistogramKernel(const float* __restrict__ input, long long n, int shift, bool check_finite,
                    DeviceState* st, unsigned int* __restrict__ histogram) {
  constexpr int kBins = 1 << kBits;
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += kThreads) local[b] = 0;
  __syncthreads();
  const int match_shift = shift + kBits;
  const unsigned int prefix_high = st->prefix >> match_shift;
  const int lane = threadIdx.x & 31;
  const long long chunk = static_cast<long long>(kThreads) * kHistogramUnroll;
  const long long stride = static_cast<long long>(gridDim.x) * chunk;
  for (long long base = blockIdx.x * chunk; base < n; base += stride) {
    unsigned int bits[kHistogramUnroll];
#pragma unroll
    for (int u = 0; u < kHistogramUnroll; ++u) {
      long long i = base + u * kThreads + threadIdx.x;
      bits[u] = i < n ? __float_as_uint(input[i]) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kHistogramUnroll; ++u) {
      long long i = base + u * kThreads + threadIdx.x;
      unsigned int key = MagnitudeKey(bits[u]);
      bool valid = i < n;
      if (check_finite && valid && key >= kNonFiniteKey) Latch(&st->nonfinite, i, bits[u]);
      bool want = valid && (key >> match_shift) == prefix_high;
      unsigned int digit = want ? ((key >> shift) & (kBins - 1)) : 0xffffffffu;
      unsigned int peers = __match_any_sync(0xffffffffu, digit);
      if (want && lane == __ffs(peers) - 1) atomicAdd(&local[digit], __popc(peers));
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    if (local[b] != 0) atomicAdd(&histogram[b], local[b]);
  }
}

// Finds the digit holding the remaining-th largest key (counting from the top bin) and narrows
// the state to it. Exactly one thread owns that bin when 1 <= remaining <= histogram total.
template <int kBits>
__global__ void __launch_bounds__(kFindThreads)
    FindDigitKernel(const unsigned int* __restrict__ histogram, int shift, bool last,
                    DeviceState* st) {
  constexpr int kBins = 1 << kBits;
  constexpr int kPerThread = kBins / kFindThreads;
  static_assert(kPerThread >= 1 && kBins % kFindThreads == 0);
  using Scan = cub::BlockScan<long long, kFindThreads>;
  __shared__ typename Scan::TempStorage temp;
  const long long remaining = st->remaining;
  long long counts[kPerThread];
  long long sum = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    counts[j] = histogram[kBins - 1 - (threadIdx.x * kPerThread + j)];
    sum += counts[j];
  }
  long long before = 0;
  Scan(temp).ExclusiveSum(sum, before);
  __syncthreads();  // every thread has read st->remaining before the owner rewrites it
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (before < remaining && remaining <= before + counts[j]) {
      unsigned int digit = kBins - 1 - (threadIdx.x * kPerThread + j);
      unsigned int prefix = st->prefix | (digit << shift);
      st->prefix = prefix;
      st->remaining = remaining - before;
      if (last) {
        st->key_threshold = prefix;
        st->need = remaining - before;
      }
    }
    before += counts[j];
  }
}

// Per tile: (keys > threshold) << 32 | (keys == threshold).
__global__ void __launch_bounds__(kThreads)
    TileCountKernel(const float* __restrict__ input, long long n, bool check_finite,
                    DeviceState* st, unsigned long long* __restrict__ tile_counts) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const unsigned int threshold = st->key_threshold;
  const long long base = blockIdx.x * kTile;
  unsigned int bits[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    long long i = base + j * kThreads + threadIdx.x;
    bits[j] = i < n ? __float_as_uint(input[i]) : 0u;
  }
  unsigned long long count = 0;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    long long i = base + j * kThreads + threadIdx.x;
    if (i < n) {
      unsigned int key = MagnitudeKey(bits[j]);
      if (check_finite && key >= kNonFiniteKey) Latch(&st->nonfinite, i, bits[j]);
      count += key > threshold ? kAboveOne : (key == threshold ? 1ull : 0ull);
    }
  }
  count = Reduce(temp).Sum(count);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = count;
}

// Writes the kept elements of one tile at their global positions: a kept element's position is
// (#above before it) + min(#equal before it, need). Tiles that keep nothing are not read.
__global__ void __launch_bounds__(kThreads)
    CompactKernel(const float* __restrict__ input, long long n, const DeviceState* st,
                  const unsigned long long* __restrict__ tile_inclusive, long long capacity,
                  int32_t* __restrict__ indices, float* __restrict__ values) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  const unsigned int threshold = st->key_threshold;
  const long long need = st->need;
  const unsigned long long start = blockIdx.x == 0 ? 0ull : tile_inclusive[blockIdx.x - 1];
  const unsigned long long end = tile_inclusive[blockIdx.x];
  const long long above0 = static_cast<long long>(start >> 32);
  const long long equal0 = static_cast<long long>(start & kLow);
  const long long above1 = static_cast<long long>(end >> 32);
  const long long equal1 = static_cast<long long>(end & kLow);
  const long long kept = (above1 - above0) + MinLL(equal1, need) - MinLL(equal0, need);
  if (kept == 0 || above0 + MinLL(equal0, need) >= capacity) return;  // uniform per block

  const long long base = blockIdx.x * kTile;
  unsigned int bits[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    long long i = base + j * kThreads + threadIdx.x;
    bits[j] = i < n ? __float_as_uint(input[i]) : 0u;
  }
  unsigned long long carry = start;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    long long i = base + j * kThreads + threadIdx.x;
    unsigned int key = MagnitudeKey(bits[j]);
    bool above = i < n && key > threshold;
    bool equal = i < n && key == threshold;
    unsigned long long flag = above ? kAboveOne : (equal ? 1ull : 0ull);
    unsigned long long before = 0;
    unsigned long long aggregate = 0;
    Scan(temp).ExclusiveSum(flag, before, aggregate);
    __syncthreads();  // temp is reused by the next round
    unsigned long long global = carry + before;
    long long above_before = static_cast<long long>(global >> 32);
    long long equal_before = static_cast<long long>(global & kLow);
    if (above || (equal && equal_before < need)) {
      long long pos = above_before + MinLL(equal_before, need);
      if (pos < capacity) {
        indices[pos] = static_cast<int32_t>(i);
        values[pos] = __uint_as_float(bits[j]);
      }
    }
    carry += aggregate;
  }
}

absl::Status CheckInputArgs(const char* kernel, const float* input, int64_t n, Workspace* ws) {
  if (ws == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: null workspace", kernel));
  }
  if (n < 0 || n > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d elements do not fit int32 indices (must be in [0, %d])", kernel, n, kMaxElements));
  }
  if (n > 0 && input == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: null input with n = %d", kernel, n));
  }
  return absl::OkStatus();
}

template <int kBits>
absl::Status RadixPass(const float* input, int64_t n, int shift, bool check_finite, bool find,
                       bool last, Workspace* ws, cudaStream_t stream) {
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(ws->histogram(), 0, (1 << kBits) * sizeof(unsigned int), stream));
  int blocks =
      internal::StreamingBlocks(n, int64_t{kThreads} * kHistogramUnroll, ws->resident_blocks());
  HistogramKernel<kBits><<<blocks, kThreads, 0, stream>>>(input, n, shift, check_finite,
                                                          ws->state(), ws->histogram());
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (!find) return absl::OkStatus();
  FindDigitKernel<kBits>
      <<<1, kFindThreads, 0, stream>>>(ws->histogram(), shift, last, ws->state());
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// Tile counts, their scan and the totals, under the compaction rule already in the state; then
// the compaction itself when capacity > 0. Requires n >= 1.
absl::Status CountAndCompact(const float* input, int64_t n, bool check_finite, int64_t capacity,
                             int32_t* indices, float* values, Workspace* ws, cudaStream_t stream) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  TileCountKernel<<<static_cast<unsigned int>(tiles), kThreads, 0, stream>>>(
      input, n, check_finite, ws->state(), ws->tile_counts());
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  size_t temp_bytes = ws->scan_temp_bytes();
  GRAVAC_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(ws->scan_temp(), temp_bytes,
                                                            ws->tile_counts(), ws->tile_inclusive(),
                                                            static_cast<int>(tiles), stream));
  GRAVAC_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&ws->state()->totals, ws->tile_inclusive() + (tiles - 1),
                      sizeof(unsigned long long), cudaMemcpyDeviceToDevice, stream));
  if (capacity > 0) {
    CompactKernel<<<static_cast<unsigned int>(tiles), kThreads, 0, stream>>>(
        input, n, ws->state(), ws->tile_inclusive(), capacity, indices, values);
    GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

int64_t KeptCount(const DeviceState& s) {
  int64_t above = static_cast<int64_t>(s.totals >> 32);
  int64_t equal = static_cast<int64_t>(s.totals & kLow);
  return above + (equal < s.need ? equal : s.need);
}

// Filters keep |x| >= threshold, i.e. key(x) > key(threshold) or equal, with no limit on ties.
// With compact == false only the count is produced (CountAtLeast).
absl::Status FilterImpl(const char* kernel, const float* input, int64_t n, float threshold,
                        bool compact, Workspace* ws, int64_t capacity, int32_t* indices,
                        float* values, int64_t* count, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckInputArgs(kernel, input, n, ws));
  if (!std::isfinite(threshold)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: threshold must be finite, got %f", kernel, threshold));
  }
  if (count == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: null count", kernel));
  }
  if (capacity < 0 || (capacity > 0 && (indices == nullptr || values == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: capacity %d needs non-null outputs and >= 0", kernel, capacity));
  }
  *count = 0;
  if (n == 0) return ws->Finish(stream, kernel, nullptr);
  RETURN_IF_ERROR(ws->Reserve(n, stream));
  unsigned int key_threshold = 0;  // threshold <= 0 (and -0): everything passes
  if (threshold > 0) std::memcpy(&key_threshold, &threshold, sizeof(key_threshold));
  SetCompactionKernel<<<1, 1, 0, stream>>>(ws->state(), key_threshold, LLONG_MAX);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  RETURN_IF_ERROR(
      CountAndCompact(input, n, /*check_finite=*/true, capacity, indices, values, ws, stream));
  DeviceState host;
  RETURN_IF_ERROR(ws->Finish(stream, kernel, &host));
  *count = KeptCount(host);
  if (compact && *count > capacity) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: %d elements pass |x| >= %g but the output holds %d; the first %d were written", kernel,
        *count, threshold, capacity, capacity));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TopK(const float* input, int64_t n, int64_t k, Workspace* ws, int32_t* indices,
                  float* values, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckInputArgs("TopK", input, n, ws));
  if (k < 0) return absl::InvalidArgumentError(absl::StrFormat("TopK: k = %d < 0", k));
  if (k > n) k = n;  // as the CPU twin: keep everything
  if (k > 0 && (indices == nullptr || values == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("TopK: null output with k = %d", k));
  }
  if (n == 0) return ws->Finish(stream, "TopK", nullptr);
  RETURN_IF_ERROR(ws->Reserve(n, stream));
  InitSelectKernel<<<1, 1, 0, stream>>>(ws->state(), k);
  GRAVAC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  const bool find = k > 0;  // k == 0 still reads the input once to reject non-finite values
  RETURN_IF_ERROR(RadixPass<11>(input, n, 20, /*check_finite=*/true, find, false, ws, stream));
  if (find) {
    RETURN_IF_ERROR(RadixPass<10>(input, n, 10, false, true, false, ws, stream));
    RETURN_IF_ERROR(RadixPass<10>(input, n, 0, false, true, /*last=*/true, ws, stream));
    RETURN_IF_ERROR(CountAndCompact(input, n, false, k, indices, values, ws, stream));
  }
  DeviceState host;
  RETURN_IF_ERROR(ws->Finish(stream, "TopK", &host));
  if (find && KeptCount(host) != k) {
    return absl::InternalError(absl::StrFormat(
        "TopK: compaction kept %d elements instead of k = %d (n = %d, threshold key 0x%08x, "
        "need %d)",
        KeptCount(host), k, n, host.key_threshold, host.need));
  }
  return absl::OkStatus();
}

absl::Status ThresholdFilter(const float* input, int64_t n, float threshold, Workspace* ws,
                             int64_t capacity, int32_t* indices, float* values, int64_t* count,
                             cudaStream_t stream) {
  return FilterImpl("ThresholdFilter", input, n, threshold, /*compact=*/true, ws, capacity, indices,
                    values, count, stream);
}

absl::Status CountAtLeast(const float* input, int64_t n, float threshold, Workspace* ws,
                          int64_t* count, cudaStream_t stream) {
  return FilterImpl("CountAtLeast", input, n, threshold, /*compact=*/false, ws, 0, nullptr, nullptr,
                    count, stream);
}

}  // namespace gravac::kernels::cuda

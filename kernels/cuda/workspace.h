// Workspace: the scratch memory and error record that the CUDA kernels of kernels/cuda/ reuse
// across calls, on one device.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Workspace> ws, Workspace::Create());
//   RETURN_IF_ERROR(ws->Reserve(max_elements, stream));   // optional: no growth later
//   RETURN_IF_ERROR(TopK(d_in, n, k, ws.get(), d_idx, d_val, stream));
//   RETURN_IF_ERROR(ScatterAdd(d_idx, d_val, k, 1.0f, ws.get(), d_out, n, stream));
//   RETURN_IF_ERROR(ws->Synchronize(stream));   // waits; reports errors latched by ScatterAdd
//
// Contract:
//  - Create() binds the workspace to the current device (cudaGetDevice) and allocates its fixed
//    part (device state, histogram, a pinned host mirror). Launchers must run with that device
//    current.
//  - Scratch that depends on the tensor size grows on demand to the largest n seen. Growing
//    synchronises `stream` before it frees the old scratch; Reserve(n) grows up front so that
//    later calls with at most n elements never allocate or synchronise for that reason.
//  - Kernels detect bad data on the device (non-finite inputs, out-of-range indices) and latch
//    the lowest offending position in the workspace. A launcher that synchronises (TopK,
//    ThresholdFilter, CountAtLeast, Synchronize) reads the record, clears it and turns the first
//    error into a Status, including errors latched by earlier asynchronous launches.
//
// Thread-safety: not thread-safe. All launches that use one Workspace must be issued from one
// thread at a time onto one stream (or onto streams the caller orders), because they share the
// scratch buffers.
#ifndef GRAVAC_KERNELS_CUDA_WORKSPACE_H_
#define GRAVAC_KERNELS_CUDA_WORKSPACE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gravac::kernels::cuda {

// Largest tensor the kernels accept (int32 indices), as the CPU kernels.
inline constexpr int64_t kMaxElements = 2147483647;

namespace internal {

// Elements per tile of the count / compaction kernels (256 threads x 16 items).
inline constexpr int kTileThreads = 256;
inline constexpr int kTileItems = 16;
inline constexpr int64_t kTileElements = int64_t{kTileThreads} * kTileItems;
// Bins of the widest radix-select digit (11 bits).
inline constexpr int kMaxHistogramBins = 2048;

// A latched error is (position << 32) | payload; atomicMin keeps the lowest position.
inline constexpr unsigned long long kNoError = ~0ull;

// Device-resident state shared by the kernels of one launch sequence. Plain data, the same
// layout on host and device; the error words come first so they can be reset with one memset.
struct DeviceState {
  unsigned long long nonfinite;           // payload: the float's bits (TopK, filters)
  unsigned long long scatter_bad_index;   // payload: the index value (ScatterAdd)
  unsigned long long residual_bad_index;  // payload: the index value (UpdateResidual)
  // Radix select: the key bits decided so far, and how many keys matching them remain to pick.
  unsigned int prefix;
  // Compaction rule: keep keys > key_threshold, and the first `need` keys == key_threshold
  // (lowest indices first).
  unsigned int key_threshold;
  long long remaining;
  long long need;
  // Whole-input totals from the tile scan: (keys > threshold) << 32 | (keys == threshold).
  unsigned long long totals;
};
inline constexpr size_t kErrorBytes = 3 * sizeof(unsigned long long);

}  // namespace internal

class Workspace {
 public:
  static absl::StatusOr<std::unique_ptr<Workspace>> Create();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Grows the size-dependent scratch for tensors of up to n elements (see the contract).
  absl::Status Reserve(int64_t n, cudaStream_t stream);

  // Blocks until `stream` is idle, then reports and clears the errors latched on the device.
  absl::Status Synchronize(cudaStream_t stream);

  int device() const { return device_; }

  // ---- For the kernels of kernels/cuda/ only. ----
  internal::DeviceState* state() { return state_; }
  unsigned int* histogram() { return histogram_; }
  unsigned long long* tile_counts() { return tile_counts_; }
  unsigned long long* tile_inclusive() { return tile_inclusive_; }
  void* scan_temp() { return scan_temp_; }
  size_t scan_temp_bytes() const { return scan_temp_bytes_; }
  // Blocks of the streaming kernels that fit on the device at once.
  int resident_blocks() const { return resident_blocks_; }
  // Copies the device state to the host, clears the error words, waits for `stream`, and turns
  // a latched error into a Status (naming `kernel` for non-finite inputs). On success the state
  // is in *host_state when it is not null.
  absl::Status Finish(cudaStream_t stream, std::string_view kernel,
                      internal::DeviceState* host_state);

 private:
  Workspace() = default;
  absl::Status Init();

  int device_ = 0;
  int resident_blocks_ = 0;
  internal::DeviceState* state_ = nullptr;        // device
  internal::DeviceState* host_state_ = nullptr;   // pinned host mirror
  unsigned int* histogram_ = nullptr;             // device, kMaxHistogramBins
  unsigned long long* tile_counts_ = nullptr;     // device, tile_capacity_
  unsigned long long* tile_inclusive_ = nullptr;  // device, tile_capacity_
  int64_t tile_capacity_ = 0;
  void* scan_temp_ = nullptr;
  size_t scan_temp_bytes_ = 0;
};

}  // namespace gravac::kernels::cuda

#endif  // GRAVAC_KERNELS_CUDA_WORKSPACE_H_

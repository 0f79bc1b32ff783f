// Input checks shared by the CPU compressors.
//
// CheckInput rejects tensors that do not fit int32 indices and tensors with non-finite values
// (NaN, ±Inf), naming the tensor and the first bad index. It reads the input once, in parallel
// on `pool` (may be nullptr). Compressors whose main pass already reads every element may fuse
// the finiteness test into it instead and call NonFiniteError to build the same message.
//
// Thread-safety: stateless; safe from any thread (a ThreadPool serialises its own calls).
#ifndef GRAVAC_KERNELS_CPU_CHECK_H_
#define GRAVAC_KERNELS_CPU_CHECK_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"

namespace gravac::kernels::cpu {

// Largest tensor a compressor accepts (int32 indices on the wire).
inline constexpr int64_t kMaxElements = 2147483647;

absl::Status CheckSize(int64_t n, std::string_view tensor_name);
absl::Status CheckInput(absl::Span<const float> input, std::string_view tensor_name,
                        ThreadPool* pool);
absl::Status NonFiniteError(std::string_view tensor_name, int64_t index, float value);

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_CHECK_H_

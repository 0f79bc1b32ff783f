// CpuBackend: the CompressionBackend (kernels/backend.h) for host memory, over the CPU reference
// kernels (select.h, error_feedback.h, scatter_add.h, sum_squares.h). Its calls run on the
// caller's thread (and the optional pool) and are complete when they return.
//
// Thread-safety: as CompressionBackend (one owner).
#ifndef GRAVAC_KERNELS_CPU_BACKEND_H_
#define GRAVAC_KERNELS_CPU_BACKEND_H_

#include <memory>

#include "core/thread_pool.h"
#include "kernels/backend.h"

namespace gravac::kernels::cpu {

// `pool` (not owned, may be null) parallelises top-k as the CPU compressors do.
std::unique_ptr<CompressionBackend> MakeCpuBackend(ThreadPool* pool);

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_BACKEND_H_

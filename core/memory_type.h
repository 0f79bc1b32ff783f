// MemoryType: where a buffer lives, host memory or the memory of a CUDA device. Buffers carry it
// from the client to gravacd; the compression backend (kernels/backend.h) and the transport
// (daemon/transport/transport.h) are chosen by it and declare the types they handle.
//
// Thread-safety: plain values.
#ifndef GRAVAC_CORE_MEMORY_TYPE_H_
#define GRAVAC_CORE_MEMORY_TYPE_H_

#include <string_view>

namespace gravac {

enum class MemoryType { kHost, kDevice };

inline std::string_view MemoryTypeName(MemoryType t) {
  return t == MemoryType::kHost ? "host" : "device";
}

}  // namespace gravac

#endif  // GRAVAC_CORE_MEMORY_TYPE_H_

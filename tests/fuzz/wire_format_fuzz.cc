// libFuzzer target: the sparse wire format's decoder (kernels/wire_format.h), the bytes a peer
// daemon sends. The checksum is recomputed over the input first, so the fuzzer reaches the
// checks behind it (a wrong checksum is one seed away). Checks: Decode never crashes; what it
// accepts re-encodes to a buffer that decodes to the same tensor; DecodeAdd accepts exactly what
// Decode accepts and adds bit-identically to Decode + cpu::DecompressAdd, leaving `out`
// unchanged on error.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#define XXH_INLINE_ALL
#include "kernels/cpu/scatter_add.h"
#include "kernels/wire_format.h"
#include "xxhash.h"

namespace {

using gravac::kernels::Compressed;
using gravac::kernels::kWireHeaderSize;

void FixChecksum(std::vector<uint8_t>& buf) {
  if (buf.size() < kWireHeaderSize) return;
  const uint64_t header_hash = XXH64(buf.data(), 32, 0);
  const uint64_t sum =
      XXH64(buf.data() + kWireHeaderSize, buf.size() - kWireHeaderSize, header_hash);
  std::memcpy(buf.data() + 32, &sum, sizeof(sum));
}

// Bitwise equality of two float vectors (memcmp must not see an empty vector's null data()).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool SameTensor(const Compressed& a, const Compressed& b) {
  return a.dense_size == b.dense_size && a.dense == b.dense && a.value_type == b.value_type &&
         a.implicit_indices == b.implicit_indices && a.seed == b.seed && a.indices == b.indices &&
         SameBits(a.values, b.values);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  FixChecksum(buf);
  // Decode regenerates randomk indices in O(dense_size) by design (wire_format.h); the engine
  // only decodes with DecodeAdd, which checks dense_size against its own tensor first. Large
  // implicit-index tensors would only time out here.
  int64_t claimed = 0;
  if (buf.size() >= 16) std::memcpy(&claimed, buf.data() + 8, sizeof(claimed));
  if (buf.size() >= 16 && buf[6] == 1 && claimed > (int64_t{1} << 20)) return 0;
  Compressed c;
  const absl::Status decoded = gravac::kernels::Decode(buf, &c);
  // DecodeAdd into a small output (regenerating randomk indices costs O(dense_size)).
  constexpr int64_t kMaxAdd = 1 << 16;
  int64_t dense_size = 0;
  if (buf.size() >= 16) std::memcpy(&dense_size, buf.data() + 8, sizeof(dense_size));
  if (dense_size >= 0 && dense_size <= kMaxAdd) {
    std::vector<float> out(static_cast<size_t>(dense_size), 0.5f);
    const std::vector<float> before = out;
    const absl::Status added = gravac::kernels::DecodeAdd(buf, 0.25f, absl::MakeSpan(out));
    if (added.ok() != decoded.ok()) std::abort();
    if (!added.ok() && out != before) std::abort();
    if (added.ok()) {
      std::vector<float> want = before;
      if (!gravac::kernels::cpu::DecompressAdd(c, 0.25f, absl::MakeSpan(want)).ok()) std::abort();
      if (!SameBits(want, out)) std::abort();
    }
  }
  if (!decoded.ok()) return 0;
  std::vector<uint8_t> again;
  if (!gravac::kernels::Encode(c, &again).ok()) std::abort();
  if (again.size() != gravac::kernels::EncodedSize(c)) std::abort();
  Compressed back;
  if (!gravac::kernels::Decode(again, &back).ok() || !SameTensor(c, back)) std::abort();
  return 0;
}

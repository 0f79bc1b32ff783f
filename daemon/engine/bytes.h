// ByteWriter / ByteReader: the little-endian packing the engine uses for its negotiation
// messages and exchange payloads (host must be little-endian, like kernels/wire_format.h).
// ByteReader never reads past its span: a short buffer turns every later read into a failure
// that ok() reports.
//
// Thread-safety: plain values.
#ifndef GRAVAC_DAEMON_ENGINE_BYTES_H_
#define GRAVAC_DAEMON_ENGINE_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"

namespace gravac::daemon::internal {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &value, sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  void PutBytes(const void* data, size_t size) {
    if (size == 0) return;
    const size_t at = out_->size();
    out_->resize(at + size);
    std::memcpy(out_->data() + at, data, size);
  }

 private:
  std::vector<uint8_t>* out_;
};

class ByteReader {
 public:
  explicit ByteReader(absl::Span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T Get() {
    T value{};
    if (!Take(sizeof(T))) return value;
    std::memcpy(&value, in_.data() + pos_ - sizeof(T), sizeof(T));
    return value;
  }
  std::string GetString() {
    const uint32_t size = Get<uint32_t>();
    if (!Take(size)) return {};
    return std::string(reinterpret_cast<const char*>(in_.data() + pos_ - size), size);
  }
  // A view of the next `size` bytes (empty on a short buffer).
  absl::Span<const uint8_t> GetBytes(size_t size) {
    if (!Take(size)) return {};
    return in_.subspan(pos_ - size, size);
  }
  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool Take(size_t size) {
    if (!ok_ || in_.size() - pos_ < size) {
      ok_ = false;
      return false;
    }
    pos_ += size;
    return true;
  }
  absl::Span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace gravac::daemon::internal

#endif  // GRAVAC_DAEMON_ENGINE_BYTES_H_

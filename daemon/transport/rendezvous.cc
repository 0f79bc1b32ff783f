#include "daemon/transport/rendezvous.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/errno_status.h"
#include "core/status.h"

namespace gravac::transport {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(5);

// Reads the whole file, or nullopt when it does not exist yet.
absl::StatusOr<std::optional<std::string>> ReadIfExists(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoStatus(absl::StatusCode::kUnavailable, errno,
                       absl::StrCat("rendezvous: open ", path));
  }
  absl::Cleanup closer = [fd] { close(fd); };
  std::string blob;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StatusCode::kUnavailable, errno,
                         absl::StrCat("rendezvous: read ", path));
    }
    blob.append(buffer, static_cast<size_t>(n));
  }
  return std::optional<std::string>(std::move(blob));
}

}  // namespace

FileRendezvous::FileRendezvous(std::string dir, int rank, int world_size, absl::Duration timeout)
    : dir_(std::move(dir)), rank_(rank), world_size_(world_size), timeout_(timeout) {}

std::string FileRendezvous::PathFor(int rank) const {
  return absl::StrCat(dir_, "/rank-", rank, ".addr");
}

absl::Status FileRendezvous::Publish(std::string_view blob) {
  if (rank_ < 0 || rank_ >= world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: rank ", rank_, " outside world of size ", world_size_));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous: rank ", rank_, ": create ", dir_, ": ", ec.message()));
  }
  const std::string path = PathFor(rank_);
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    out.flush();
    if (!out) {
      return ErrnoStatus(absl::StatusCode::kUnavailable, errno,
                         absl::StrCat("rendezvous: rank ", rank_, ": write ", tmp));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous: rank ", rank_, ": rename to ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FileRendezvous::WaitForAll() {
  const absl::Time deadline = absl::Now() + timeout_;
  std::vector<std::optional<std::string>> blobs(world_size_);
  while (true) {
    std::vector<int> missing;
    for (int r = 0; r < world_size_; ++r) {
      if (blobs[r].has_value()) continue;
      absl::StatusOr<std::optional<std::string>> blob = ReadIfExists(PathFor(r));
      if (!blob.ok()) return blob.status();
      blobs[r] = *std::move(blob);
      if (!blobs[r].has_value()) missing.push_back(r);
    }
    if (missing.empty()) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: rank ", rank_, ": rank", missing.size() > 1 ? "s " : " ",
                       absl::StrJoin(missing, ", "), " of ", world_size_, " did not publish in ",
                       dir_, " within ", absl::FormatDuration(timeout_)));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(kPollInterval));
  }
  std::vector<std::string> out;
  out.reserve(world_size_);
  for (auto& blob : blobs) out.push_back(std::move(*blob));
  return out;
}

absl::StatusOr<std::vector<std::string>> FileRendezvous::Exchange(std::string_view blob) {
  RETURN_IF_ERROR(Publish(blob));
  return WaitForAll();
}

}  // namespace gravac::transport

#include "runner/line_prefixer.h"

#include <errno.h>
#include <unistd.h>

namespace gravac::runner {

void LinePrefixer::Feed(std::string_view data, std::string* out) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(data);
      if (pending_.size() >= kMaxPending) Finish(out);
      return;
    }
    out->append(prefix_);
    out->append(pending_);
    out->append(data.substr(0, nl + 1));
    pending_.clear();
    data.remove_prefix(nl + 1);
  }
}

void LinePrefixer::Finish(std::string* out) {
  if (pending_.empty()) return;
  out->append(prefix_);
  out->append(pending_);
  out->push_back('\n');
  pending_.clear();
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace gravac::runner

// LinePrefixer: turns a child's output stream into whole lines that start with a label, e.g.
// "[rank 3] loss 0.25", so the interleaved output of many processes stays readable.
//
// Bytes are buffered until a newline; a line is emitted whole with the prefix. A partial line
// longer than kMaxPending bytes is emitted early (ending in a newline) so a process that never
// prints a newline cannot grow the buffer without bound; Finish() emits what is left at end of
// stream, adding the missing newline.
//
// Thread-safety: not thread-safe; one LinePrefixer per stream, driven by one thread.
#ifndef GRAVAC_RUNNER_LINE_PREFIXER_H_
#define GRAVAC_RUNNER_LINE_PREFIXER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace gravac::runner {

class LinePrefixer {
 public:
  static constexpr size_t kMaxPending = 64 * 1024;

  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends the complete lines found so far in `data` (with what was pending) to *out.
  void Feed(std::string_view data, std::string* out);
  // Appends the pending partial line, if any, terminated by a newline.
  void Finish(std::string* out);

  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  std::string pending_;
};

// Writes all of `data` to `fd`, retrying short writes and EINTR. Errors (a closed terminal) are
// ignored: losing output must not stop the job.
void WriteAll(int fd, std::string_view data);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_LINE_PREFIXER_H_

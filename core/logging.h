// Logging: a Logger writes one line per message to a sink (stderr by default), prefixed with the
// level, the time, the owner's prefix (e.g. "gravacd[node 1]") and file:line.
//
//   Logger log("gravacd[node 1]", LogLevel::kInfo);
//   GRAVAC_LOG(log, kWarning, "stall: tensor '%s' waits for ranks %s", name, missing);
//
// There is no global logger: main builds one and passes it down. Log an error once, where it is
// decided; callers propagate the Status.
//
// Thread-safety: Log() is safe to call from any thread; each message is one fwrite.
#ifndef GRAVAC_CORE_LOGGING_H_
#define GRAVAC_CORE_LOGGING_H_

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace gravac {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parses "debug", "info", "warning" or "error" (case-insensitive).
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text);

class Logger {
 public:
  explicit Logger(std::string prefix, LogLevel min_level = LogLevel::kInfo,
                  std::FILE* sink = stderr);

  bool Enabled(LogLevel level) const { return level >= min_level_; }
  void Log(LogLevel level, const char* file, int line, std::string_view message) const;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  LogLevel min_level_;
  std::FILE* sink_;
};

}  // namespace gravac

#define GRAVAC_LOG(logger, level, ...)                                          \
  do {                                                                          \
    if ((logger).Enabled(::gravac::LogLevel::level)) {                          \
      (logger).Log(::gravac::LogLevel::level, __FILE__, __LINE__,               \
                   ::absl::StrFormat(__VA_ARGS__));                             \
    }                                                                           \
  } while (false)

#endif  // GRAVAC_CORE_LOGGING_H_

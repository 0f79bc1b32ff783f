#include "core/logging.h"

#include <string.h>

#include "absl/strings/ascii.h"
#include "core/absl_compat.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gravac {
namespace {

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(AsAbsl(text));
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      StrCat("unknown log level '", text, "' (debug, info, warning, error)"));
}

Logger::Logger(std::string prefix, LogLevel min_level, std::FILE* sink)
    : prefix_(std::move(prefix)), min_level_(min_level), sink_(sink) {}

void Logger::Log(LogLevel level, const char* file, int line, std::string_view message) const {
  if (!Enabled(level)) return;
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string text = StrCat(
      std::string(1, LevelLetter(level)),
      absl::FormatTime(" %H:%M:%E6S ", absl::Now(), absl::LocalTimeZone()), prefix_, " ", base,
      ":", line, "] ", message, "\n");
  fwrite(text.data(), 1, text.size(), sink_);
  fflush(sink_);
}

}  // namespace gravac

#include "bench/peer.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/errno_status.h"
#include "core/status.h"

extern char** environ;

namespace gravac::bench {
namespace {

// Debian's abseil has its own string_view type, distinct from std::string_view.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

class FlatJsonParser {
 public:
  explicit FlatJsonParser(std::string_view text) : text_(text) {}

  absl::StatusOr<FlatJson> Object() {
    FlatJson object;
    RETURN_IF_ERROR(Expect('{'));
    if (Peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        ASSIGN_OR_RETURN(std::string key, String());
        RETURN_IF_ERROR(Expect(':'));
        ASSIGN_OR_RETURN(JsonScalar value, Scalar());
        object[key] = std::move(value);
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        RETURN_IF_ERROR(Expect('}'));
        break;
      }
    }
    if (Peek() != '\0') return Error("trailing characters after the object");
    return object;
  }

 private:
  // The next non-space character ('\0' at the end), without consuming it.
  char Peek() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  absl::Status Expect(char c) {
    if (Peek() != c) return Error(absl::StrFormat("expected '%c'", c));
    ++pos_;
    return absl::OkStatus();
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("JSON: %s at offset %d of '%s'", what, pos_, text_));
  }

  absl::StatusOr<std::string> String() {
    RETURN_IF_ERROR(Expect('"'));
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      char e = text_[pos_++];
      constexpr std::string_view kEscaped = "\"\\/bfnrt", kMeant = "\"\\/\b\f\n\r\t";
      if (size_t i = kEscaped.find(e); i != std::string_view::npos) {
        out.push_back(kMeant[i]);
        continue;
      }
      uint32_t code = 0;
      if (e != 'u' || pos_ + 4 > text_.size() ||
          !absl::SimpleHexAtoi(AbslView(text_.substr(pos_, 4)), &code) || code >= 0xd800) {
        return Error("bad or unsupported escape");
      }
      pos_ += 4;
      if (code < 0x80) {
        out.push_back(static_cast<char>(code));
      } else if (code < 0x800) {
        out.push_back(static_cast<char>(0xc0 | (code >> 6)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
      } else {
        out.push_back(static_cast<char>(0xe0 | (code >> 12)));
        out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
      }
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;  // closing quote
    return out;
  }

  absl::StatusOr<JsonScalar> Scalar() {
    JsonScalar value;
    char c = Peek();
    if (c == '"') {
      value.kind = JsonScalar::Kind::kString;
      ASSIGN_OR_RETURN(value.text, String());
      return value;
    }
    for (std::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        value.kind = word == "null" ? JsonScalar::Kind::kNull : JsonScalar::Kind::kBool;
        value.number = word == "true" ? 1.0 : 0.0;
        return value;
      }
    }
    size_t end = pos_;
    while (end < text_.size() && std::strchr("+-0123456789.eE", text_[end]) != nullptr) ++end;
    if (end == pos_ || !absl::SimpleAtod(AbslView(text_.substr(pos_, end - pos_)), &value.number)) {
      return Error("expected a string, number, true, false or null");
    }
    pos_ = end;
    value.kind = JsonScalar::Kind::kNumber;
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::string> RunAndCapture(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RunAndCapture: empty command");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(absl::StatusCode::kInternal, errno, "pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return ErrnoStatus(absl::StatusCode::kInternal, rc, absl::StrFormat("posix_spawn '%s'", argv[0]));
  }
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t got = read(fds[0], buffer, sizeof(buffer));
    if (got > 0) {
      out.append(buffer, got);
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(absl::StatusCode::kInternal, errno, "waitpid");
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return out;
  return absl::InternalError(absl::StrFormat(
      "'%s' %s %d", argv[0], WIFEXITED(wstatus) ? "exited with status" : "was killed by signal",
      WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus)));
}

absl::StatusOr<FlatJson> ParseFlatJson(std::string_view text) {
  return FlatJsonParser(text).Object();
}

absl::StatusOr<double> GetNumber(const FlatJson& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->second.kind != JsonScalar::Kind::kNumber) {
    return absl::InvalidArgumentError(absl::StrFormat("JSON: no number under \"%s\"", key));
  }
  return it->second.number;
}

absl::StatusOr<std::string> GetString(const FlatJson& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->second.kind != JsonScalar::Kind::kString) {
    return absl::InvalidArgumentError(absl::StrFormat("JSON: no string under \"%s\"", key));
  }
  return it->second.text;
}

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

absl::StatusOr<PeerResult> ParsePeerOutput(std::string_view output) {
  PeerResult result;
  bool saw_env = false, saw_memcpy = false;
  for (absl::string_view piece : absl::StrSplit(AbslView(output), '\n')) {
    absl::string_view stripped = absl::StripAsciiWhitespace(piece);
    std::string_view line(stripped.data(), stripped.size());
    if (line.empty() || line.front() != '{') continue;
    ASSIGN_OR_RETURN(FlatJson object, ParseFlatJson(line));
    ASSIGN_OR_RETURN(std::string kind, GetString(object, "kind"));
    if (kind == "env") {
      ASSIGN_OR_RETURN(result.torch_version, GetString(object, "torch_version"));
      ASSIGN_OR_RETURN(double threads, GetNumber(object, "threads"));
      ASSIGN_OR_RETURN(double n, GetNumber(object, "n"));
      result.threads = static_cast<int64_t>(threads);
      result.n = static_cast<int64_t>(n);
      saw_env = true;
    } else if (kind == "memcpy") {
      ASSIGN_OR_RETURN(result.memcpy_ms, GetNumber(object, "ms"));
      ASSIGN_OR_RETURN(result.clone_ms, GetNumber(object, "clone_ms"));
      saw_memcpy = true;
    } else if (kind == "topk") {
      PeerTopK row;
      ASSIGN_OR_RETURN(row.density, GetNumber(object, "density"));
      ASSIGN_OR_RETURN(double k, GetNumber(object, "k"));
      row.k = static_cast<int64_t>(k);
      ASSIGN_OR_RETURN(row.topk_ms, GetNumber(object, "ms"));
      ASSIGN_OR_RETURN(row.memcpy_ms, GetNumber(object, "memcpy_ms"));
      result.topk.push_back(row);
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("peer: unknown line kind '%s'", kind));
    }
  }
  if (!saw_env || !saw_memcpy) {
    return absl::InvalidArgumentError("peer: output lacks its 'env' or 'memcpy' line");
  }
  return result;
}

}  // namespace gravac::bench

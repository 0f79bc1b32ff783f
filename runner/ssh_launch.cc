#include "runner/ssh_launch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/absl_compat.h"
#include "netemu/process.h"

namespace gravac::runner {
namespace {

// $1 host (for messages), $2 folder to create, $3 1 = remove it at the end, $4 kill grace in
// seconds, $5 ready files (space separated), $6 files to read from stdin, then NAME=VALUE words,
// "--", the program and its arguments. See ssh_launch.h for what it does and why.
constexpr char kRemoteWrapper[] = R"sh(host=$1 dir=$2 cleanup=$3 grace=$4 ready=$5 files=$6; shift 6
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do export "$1" || exit 126; shift; done; shift
private= pid=
trap '[ -z "$private" ] || rm -rf "$private"' EXIT
trap '[ -z "$pid" ] || kill -TERM -"$pid" 2>/dev/null; exit 129' HUP
trap '[ -z "$pid" ] || kill -TERM -"$pid" 2>/dev/null; exit 143' TERM
if [ "$files" -gt 0 ]; then
  mask=$(umask); umask 077
  if ! private=$(mktemp -d "${TMPDIR:-/tmp}/gravacrun-tls-XXXXXX"); then
    echo "gravacrun: host $host: cannot make a private folder in ${TMPDIR:-/tmp}" >&2; exit 126
  fi
  i=0
  while [ "$i" -lt "$files" ]; do
    lines=-1; read -r var name lines || :
    k=0
    while [ "$k" -lt "$lines" ] && IFS= read -r line; do
      printf '%s\n' "$line"; k=$((k + 1))
    done >"$private/$name"
    if [ "$lines" -lt 0 ] || [ "$k" != "$lines" ]; then
      echo "gravacrun: host $host: the job's certificates did not arrive over ssh" >&2; exit 126
    fi
    export "$var=$private/$name" || exit 126
    i=$((i + 1))
  done
  umask "$mask"
fi
if [ -n "$dir" ] && ! mkdir -p "$dir"; then
  echo "gravacrun: host $host: cannot create $dir" >&2; exit 126
fi
if ! command -v "$1" >/dev/null 2>&1; then
  echo "gravacrun: host $host: $1: command not found (PATH=$PATH)" >&2; exit 127
fi
exec 3<&0
setsid "$@" </dev/null 3<&- &
pid=$!
(trap '' HUP PIPE; while read -r _; do :; done
 kill -TERM -"$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
 sleep "$grace"; kill -KILL -"$pid" 2>/dev/null
 [ -z "$private" ] || rm -rf "$private") <&3 >/dev/null 2>&1 &
watch=$!
exec 3<&-
waiter=
if [ -n "$ready" ]; then
  (set -f; set -- $ready
   while :; do
     n=0; for f; do [ -S "$f" ] || [ -s "$f" ] || n=1; done
     [ "$n" = 0 ] && break; sleep 0.1
   done
   line=@gravacrun-ready; for f; do [ -S "$f" ] || line="$line $(cat "$f")"; done
   echo "$line") >&2 &
  waiter=$!
fi
wait "$pid"; rc=$?
kill "$watch" $waiter 2>/dev/null
kill -KILL -"$pid" 2>/dev/null
if [ "$cleanup" = 1 ]; then rm -rf "$dir"; fi
exit "$rc")sh";

// Prints "gravacrun-probe ADDRESS GRAVACD" or fails (127: no gravacd; 126: no setsid or
// $SSH_CLIENT). Arguments: the gravacd candidates.
constexpr char kProbe[] = R"sh(a=${SSH_CLIENT%% *}
if [ -z "$a" ]; then echo "\$SSH_CLIENT is not set on the host" >&2; exit 126; fi
for c in "$@"; do
  if p=$(command -v "$c" 2>/dev/null); then
    if ! command -v setsid >/dev/null 2>&1; then
      echo "setsid (util-linux) is not on the PATH ($PATH)" >&2; exit 126
    fi
    echo "gravacrun-probe $a $p"; exit 0
  fi
done
echo "gravacd not found: tried $* on PATH=$PATH" >&2; exit 127)sh";

constexpr char kReady[] = "@gravacrun-ready";

std::vector<std::string> SshPrefix(const SshOptions& ssh) {
  std::vector<std::string> argv = {"ssh"};
  argv.insert(argv.end(), ssh.options.begin(), ssh.options.end());
  const int64_t timeout = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ssh.connect_timeout))));
  argv.insert(argv.end(), {"-T", "-o", "BatchMode=yes", "-o", StrCat("ConnectTimeout=", timeout)});
  if (ssh.port > 0) argv.insert(argv.end(), {"-p", StrCat(ssh.port)});
  if (!ssh.identity_file.empty()) argv.insert(argv.end(), {"-i", ssh.identity_file});
  return argv;
}

std::string QuotedScript(std::string_view script, std::string_view name,
                         const std::vector<std::string>& args) {
  std::vector<std::string> words = {"sh", "-c", ShellQuote(script), ShellQuote(name)};
  for (const std::string& a : args) words.push_back(ShellQuote(a));
  return absl::StrJoin(words, " ");
}

// The last non-empty line of ssh's or the probe's stderr.
std::string LastLine(std::string_view text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(AsAbsl(text), '\n')) {
    absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (!stripped.empty()) last = std::string(stripped);
  }
  return last;
}

absl::StatusOr<HostProbe> ReadProbe(const std::string& host, const netemu::CommandResult& r) {
  const int code = r.status.exit_code;
  if (code == 0) {
    for (absl::string_view line : absl::StrSplit(AsAbsl(r.out), '\n')) {
      std::vector<std::string> words =
          absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
      if (words.size() == 3 && words[0] == "gravacrun-probe") {
        return HostProbe{.host = host, .self_address = words[1], .gravacd = words[2]};
      }
    }
    return absl::InternalError(
        absl::StrFormat("host '%s': the ssh probe printed no answer (got '%s')", host, r.out));
  }
  const std::string why = LastLine(r.err);
  if (code == 255 || r.status.term_signal > 0) {
    return absl::UnavailableError(absl::StrFormat("host '%s': ssh failed: %s", host,
                                                  why.empty() ? r.status.ToString() : why));
  }
  if (code == 127) return absl::NotFoundError(absl::StrFormat("host '%s': %s", host, why));
  return absl::FailedPreconditionError(absl::StrFormat("host '%s': %s (exit %d)", host, why, code));
}

}  // namespace

std::string ShellQuote(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out += "'";
  return out;
}

std::vector<std::string> SshArgv(const SshOptions& ssh, const RemoteCommand& command) {
  std::vector<std::string> args = {
      command.host, command.dir, command.remove_dir ? "1" : "0",
      absl::StrFormat("%.3f", absl::ToDoubleSeconds(command.kill_grace)),
      absl::StrJoin(command.ready_files, " "), StrCat(command.files.size())};
  for (const auto& [name, value] : command.env) args.push_back(StrCat(name, "=", value));
  args.push_back("--");
  args.insert(args.end(), command.argv.begin(), command.argv.end());
  std::vector<std::string> argv = SshPrefix(ssh);
  argv.push_back(command.host);
  argv.push_back(QuotedScript(kRemoteWrapper, "gravacrun-remote", args));
  return argv;
}

absl::StatusOr<std::string> RemoteFilesPayload(const RemoteCommand& command) {
  auto word = [](std::string_view w, bool env) {
    if (w.empty() || (env && absl::ascii_isdigit(w[0]))) return false;
    return std::all_of(w.begin(), w.end(), [&](char c) {
      return absl::ascii_isalnum(c) || c == '_' || (!env && (c == '.' || c == '-'));
    });
  };
  std::string payload;
  for (const RemoteFile& f : command.files) {
    if (!word(f.env, true) || !word(f.name, false) || f.name == "." || f.name == "..") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "host '%s': file '%s' for %s: bad name or variable", command.host, f.name, f.env));
    }
    std::string text = f.contents;
    if (text.empty() || text.back() != '\n') text.push_back('\n');
    payload += StrCat(f.env, " ", f.name, " ", std::count(text.begin(), text.end(), '\n'), "\n",
                      text);
  }
  return payload;
}

absl::StatusOr<std::vector<HostProbe>> ProbeHosts(
    const SshOptions& ssh, const std::vector<std::string>& hosts,
    const std::vector<std::string>& gravacd_candidates) {
  const absl::Time deadline = absl::Now() + ssh.connect_timeout + absl::Seconds(10);
  std::vector<absl::StatusOr<netemu::Process>> running;
  for (const std::string& host : hosts) {
    std::vector<std::string> argv = SshPrefix(ssh);
    argv.insert(argv.end(), {"-n", host, QuotedScript(kProbe, "gravacrun-probe", gravacd_candidates)});
    running.push_back(netemu::Process::Spawn(
        argv, {.netns = "", .env = {}, .output = netemu::OutputMode::kCapture}));
  }
  std::vector<HostProbe> probes;
  std::vector<std::string> errors;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (size_t i = 0; i < hosts.size(); ++i) {
    absl::StatusOr<HostProbe> probe;
    if (!running[i].ok()) {
      probe = absl::Status(running[i].status().code(),
                           absl::StrFormat("host '%s': cannot run ssh: %s", hosts[i],
                                           running[i].status().message()));
    } else {
      absl::StatusOr<netemu::CommandResult> r =
          running[i]->Collect(std::max(deadline - absl::Now(), absl::Milliseconds(1)));
      if (!r.ok() && r.status().code() == absl::StatusCode::kDeadlineExceeded) {
        probe = absl::DeadlineExceededError(absl::StrFormat(
            "host '%s': no answer over ssh within %s", hosts[i],
            absl::FormatDuration(ssh.connect_timeout + absl::Seconds(10))));
      } else if (!r.ok()) {
        probe = absl::Status(r.status().code(),
                             absl::StrFormat("host '%s': %s", hosts[i], r.status().message()));
      } else {
        probe = ReadProbe(hosts[i], *r);
      }
    }
    if (probe.ok()) {
      probes.push_back(*std::move(probe));
    } else {
      if (code == absl::StatusCode::kOk) code = probe.status().code();
      errors.emplace_back(probe.status().message());
    }
  }
  if (!errors.empty()) return absl::Status(code, absl::StrJoin(errors, "; "));
  return probes;
}

bool TakeReadyLine(std::string* text, std::string_view prefix, std::vector<int>* values) {
  const std::string key = StrCat(prefix, kReady);
  bool found = false;
  size_t at = 0;
  while ((at = text->find(key, at)) != std::string::npos) {
    if (at != 0 && (*text)[at - 1] != '\n') {
      at += key.size();
      continue;
    }
    size_t end = text->find('\n', at);
    end = end == std::string::npos ? text->size() : end + 1;
    std::string_view rest(text->data() + at + key.size(), end - at - key.size());
    values->clear();
    for (absl::string_view w : absl::StrSplit(AsAbsl(rest), ' ', absl::SkipWhitespace())) {
      int v = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(w), &v)) values->push_back(v);
    }
    text->erase(at, end - at);
    found = true;
  }
  return found;
}

std::string HostPort(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos && !host.starts_with("[")) {
    return StrCat("[", host, "]:", port);
  }
  return StrCat(host, ":", port);
}

}  // namespace gravac::runner

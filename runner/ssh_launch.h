// Starting a job's processes on other hosts over ssh: the ssh command line, the wrapper every
// remote process runs under, and the probe that checks each host before anything starts.
//
// Remote processes. gravacrun runs each remote gravacd and worker as one local `ssh` child whose
// remote command is a POSIX sh wrapper (kRemoteWrapper in ssh_launch.cc): it exports the
// variables gravacrun sets, creates the process's folder, checks that the program exists (exit 127
// with "gravacrun: host H: PROG: command not found" otherwise) and starts the program with
// `setsid` in a session of its own, stdin /dev/null. Its stdout and stderr are the ssh channel's,
// so gravacrun prefixes them like a local child's, and ssh's exit status is the program's.
//
// Teardown (the choice, and why). The ssh child's stdin is the read end of a pipe only gravacrun
// holds (the "lifeline"); the wrapper watches its stdin, and at end of file — ssh was stopped,
// killed, lost its connection, or gravacrun died (every child has PR_SET_PDEATHSIG) — it sends
// SIGTERM to the program's whole session (process group), then SIGKILL after the kill grace. When
// the program ends by itself, the wrapper kills what is left of its group too. This needs no
// terminal: `ssh -tt` would merge stdout and stderr, rewrite line ends and depend on sshd's SIGHUP
// to a process group that the program may leave; the stdin watch works with any sshd and any
// program. A remote process therefore gets SIGTERM (not SIGINT) on Ctrl-C; gravacrun signals
// the local ssh, whose exit closes the channel.
//
// Readiness. A remote gravacd's socket and metrics-port file are on its host: the wrapper waits
// for the listed "ready files" and prints one line "@gravacrun-ready [PORT...]" (the contents of
// the non-socket files) on stderr, which the launcher takes out of the output (TakeReadyLine).
//
// Files (the job's certificates). A RemoteCommand may carry files that the wrapper writes on the
// host before the program starts: they travel inside the ssh channel, on the ssh child's stdin
// ahead of the lifeline (RemoteFilesPayload: a line "VAR NAME LINES", then LINES lines of text, per
// file), never on a command line that `ps` shows. The wrapper makes a private folder (mktemp -d,
// mode 0700, under $TMPDIR or /tmp), writes each file there with mode 0600, exports VAR as its path
// (so GRAVAC_TLS_CERT and friends point at it) and removes the folder when the program ends, on
// SIGHUP/SIGTERM to the wrapper, and when the lifeline closes (the stdin watcher, which ignores
// SIGHUP and SIGPIPE, removes it after stopping the program: a wrapper whose ssh connection was
// cut may not live to). Files that do not arrive in full fail the process (exit 126) with a
// message naming the host.
//
// Probe. Before starting anything, gravacrun runs one short ssh per remote host, all in
// parallel: it learns the address the host sees gravacrun's machine at ($SSH_CLIENT; the daemons
// there reach the controller on it) and where gravacd is on that host. A host that cannot be
// reached, refuses ssh or the key, or has no gravacd fails the job at once with the host named.
//
// Thread-safety: stateless functions; ProbeHosts blocks.
#ifndef GRAVAC_RUNNER_SSH_LAUNCH_H_
#define GRAVAC_RUNNER_SSH_LAUNCH_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gravac::runner {

struct SshOptions {
  int port = 0;                 // -p; 0 = ssh's default (its config, else 22)
  std::string identity_file;    // -i; "" = ssh's default keys
  std::vector<std::string> options;  // extra ssh words, before gravacrun's own (they win)
  absl::Duration connect_timeout = absl::Seconds(10);
};

// A text file (PEM) that the wrapper writes on the host (Files above).
struct RemoteFile {
  std::string env;       // exported as the file's path on the host, e.g. GRAVAC_TLS_KEY
  std::string name;      // its name in the private folder: letters, digits, '.', '_', '-'
  std::string contents;  // text; a missing final newline is added
};

// One process to run on `host`.
struct RemoteCommand {
  std::string host;
  std::vector<std::string> argv;                             // argv[0] looked up on the host
  std::vector<std::pair<std::string, std::string>> env;      // exported before it starts
  std::string dir;                                           // created first ("" = none)
  bool remove_dir = false;                                   // removed when the program ends
  std::vector<std::string> ready_files;                      // see Readiness above
  absl::Duration kill_grace = absl::Seconds(3);              // SIGTERM -> SIGKILL on the host
  std::vector<RemoteFile> files;                             // see Files above
};

// Quotes one word for a POSIX shell ('...' with ' written '\'').
std::string ShellQuote(std::string_view word);

// The local argv that runs `command` on its host: ssh [options] host 'sh -c WRAPPER ...'.
std::vector<std::string> SshArgv(const SshOptions& ssh, const RemoteCommand& command);

// What the ssh child's stdin must carry before the lifeline: `command`'s files (empty without
// any). InvalidArgument naming the file for a bad variable or file name.
absl::StatusOr<std::string> RemoteFilesPayload(const RemoteCommand& command);

// What the probe learned about a host.
struct HostProbe {
  std::string host;
  std::string self_address;  // this machine's address as the host sees it (from $SSH_CLIENT)
  std::string gravacd;       // gravacd's path on the host
};

// Probes every host in parallel (see Probe above). `gravacd_candidates` are tried in order on the
// host's PATH (a name or a path). Fails with Unavailable (ssh failed: unreachable, refused, bad
// key; the message carries ssh's own line), NotFound (no gravacd) or DeadlineExceeded (no answer
// within connect_timeout + 10 s), naming every host that failed.
absl::StatusOr<std::vector<HostProbe>> ProbeHosts(const SshOptions& ssh,
                                                  const std::vector<std::string>& hosts,
                                                  const std::vector<std::string>& gravacd_candidates);

// Removes the "<prefix>@gravacrun-ready ..." lines from the prefixed output `*text`; returns true
// if there was one, with its numbers in *values.
bool TakeReadyLine(std::string* text, std::string_view prefix, std::vector<int>* values);

// "host:port", bracketing an IPv6 address.
std::string HostPort(std::string_view host, int port);

}  // namespace gravac::runner

#endif  // GRAVAC_RUNNER_SSH_LAUNCH_H_

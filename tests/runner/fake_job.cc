#include "tests/runner/fake_job.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/absl_compat.h"
#include "core/status.h"

namespace gravac::runner {
namespace {

// Sets $port_file, $socket, $metrics_port_file, $metrics_address and $node_rank from the
// arguments; write_metrics_port PORT writes PORT to $metrics_port_file when one was given.
constexpr char kScriptHead[] =
    "#!/bin/sh\n"
    "for a in \"$@\"; do\n"
    "  case \"$a\" in\n"
    "    --port_file=*) port_file=\"${a#--port_file=}\" ;;\n"
    "    --socket=*) socket=\"${a#--socket=}\" ;;\n"
    "    --metrics_port_file=*) metrics_port_file=\"${a#--metrics_port_file=}\" ;;\n"
    "    --metrics_address=*) metrics_address=\"${a#--metrics_address=}\" ;;\n"
    "    --node_rank=*) node_rank=\"${a#--node_rank=}\" ;;\n"
    "  esac\n"
    "done\n"
    "write_metrics_port() {\n"
    "  [ -z \"$metrics_port_file\" ] || echo \"$1\" > \"$metrics_port_file\"\n"
    "}\n";

}  // namespace

absl::StatusOr<FakeJob> FakeJob::Create() {
  char tmpl[] = "/tmp/gravacrun-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  FakeJob job{std::string(tmpl)};
  RETURN_IF_ERROR(job.WriteController(StrCat("echo controller \"$@\"\necho ", kPort,
                                             " > \"$port_file\"\nwrite_metrics_port ", kMetricsPort,
                                             "\nexec sleep 600")));
  RETURN_IF_ERROR(job.WriteDaemon("exec sleep 600"));
  return job;
}

FakeJob& FakeJob::operator=(FakeJob&& other) noexcept {
  if (this != &other) {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    dir_ = std::move(other.dir_);
    other.dir_.clear();
  }
  return *this;
}

FakeJob::~FakeJob() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

RunnerOptions FakeJob::Options() const {
  RunnerOptions o;
  o.controller_path = Path("controller.sh");
  o.gravacd_path = Path("daemon.sh");
  o.run_dir = Path("run");
  o.start_timeout = absl::Seconds(20);
  o.exit_grace = absl::Milliseconds(300);
  o.kill_grace = absl::Seconds(2);
  return o;
}

absl::Status FakeJob::WriteController(std::string_view body) const {
  return WriteScript("controller.sh", body);
}

absl::Status FakeJob::WriteDaemon(std::string_view body, bool write_metrics_port) const {
  return WriteScript(
      "daemon.sh", StrCat("echo daemon \"$@\"\ntouch \"$socket\"\n",
                          write_metrics_port ? StrCat("write_metrics_port $((", kDaemonMetricsPort,
                                                      " + node_rank))\n")
                                             : std::string(),
                          body));
}

absl::Status FakeJob::WriteScript(std::string_view name, std::string_view body) const {
  const std::string path = Path(name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << kScriptHead << body << "\n";
    if (!out) return absl::InternalError(StrCat("cannot write ", tmp));
  }
  chmod(tmp.c_str(), 0755);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic: never exec a half-written script
  if (ec) return absl::InternalError(StrCat("rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

std::string FakeJob::Path(std::string_view name) const { return StrCat(dir_, "/", name); }

std::string FakeJob::RunDirPath(std::string_view name) const { return StrCat(dir_, "/run/", name); }

std::string FakeJob::Read(std::string_view name) const {
  std::ifstream in(Path(name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gravac::runner

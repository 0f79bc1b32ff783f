// gravacctl: inspect the jobs of a gravac controller.
//
//   gravacctl jobs --controller host:port [--json] [--timeout_s 5]
//   gravacctl status --controller host:port [--job NAME [--run_id RUN]] [--json] [--timeout_s 5]
//   (both) [--tls_ca F --tls_cert F --tls_key F | --insecure_plaintext]
//
// The connection is TLS: --tls_ca checks the controller's certificate, and the client certificate
// (any of the job's CA) is needed unless the controller serves status openly
// (--status_without_cert). gravacrun sets GRAVAC_TLS_* for its workers, so a gravacctl started
// from a rank finds them.
//
// `jobs` lists every job the controller knows (running, assembling, ended and not yet
// forgotten). `status` prints one job (its newest run, or --run_id's; without --job the only job,
// or "default"): the nodes and their ranks, the θ in force, the search state, the gains, the
// throughput and the bytes saved. Exit code 0 on success, 1 when the controller cannot be
// reached, the job is unknown or the command line is wrong.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "controller/ctl/status_format.h"
#include "core/settings.h"
#include "core/status.h"
#include "core/tls_settings.h"
#include "gravac/v1/controller.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_security.h"
#include "proto/grpc_status.h"

namespace gravac::ctl {
namespace {

constexpr SettingSpec kSettings[] = {
    {"controller", "GRAVAC_CONTROLLER", "", "host:port of gravac-controller", SettingType::kString},
    {"job", "GRAVAC_JOB_NAME", "", "status: the job's name", SettingType::kString},
    {"run_id", "", "", "status: the run of the job (default: its newest)", SettingType::kString},
    {"json", "", "false", "print the status as JSON", SettingType::kBool},
    {"timeout_s", "", "5", "give up after this many seconds", SettingType::kInt},
};

// kSettings followed by the TLS settings of core/tls_settings.h.
std::vector<SettingSpec> Table() {
  std::vector<SettingSpec> table(std::begin(kSettings), std::end(kSettings));
  table.insert(table.end(), std::begin(kTlsSettings), std::end(kTlsSettings));
  table.insert(table.end(), std::begin(kTlsClientSettings), std::end(kTlsClientSettings));
  return table;
}

constexpr char kUsage[] =
    "usage: gravacctl status --controller host:port [--job NAME [--run_id RUN]] [--json]\n"
    "       gravacctl jobs --controller host:port [--json]\n"
    "       (both) [--tls_ca F --tls_cert F --tls_key F | --insecure_plaintext]\n";

// The call failed without the channel ever connecting (a TLS handshake refused, say).
bool NeverReady(grpc::Channel& channel, const grpc::Status& rpc) {
  return channel.GetState(false) != GRPC_CHANNEL_READY &&
         (rpc.error_code() == grpc::StatusCode::UNAVAILABLE ||
          rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
}

absl::Status Print(bool json, const google::protobuf::Message& message, const std::string& table) {
  if (json) {
    ASSIGN_OR_RETURN(std::string text, FormatJson(message));
    std::fputs(text.c_str(), stdout);
    std::fputs("\n", stdout);
  } else {
    std::fputs(table.c_str(), stdout);
  }
  return absl::OkStatus();
}

absl::Status Main(const Settings& s) {
  const std::vector<std::string>& args = s.positional();
  if (args.size() != 1 || (args[0] != "status" && args[0] != "jobs")) {
    return absl::InvalidArgumentError(kUsage);
  }
  ASSIGN_OR_RETURN(std::string address, s.GetString("controller"));
  if (address.empty()) {
    return absl::InvalidArgumentError("--controller (or GRAVAC_CONTROLLER) is required");
  }
  ASSIGN_OR_RETURN(bool json, s.GetBool("json"));
  ASSIGN_OR_RETURN(int64_t timeout_s, s.GetInt("timeout_s"));
  ASSIGN_OR_RETURN(proto::GrpcSecurity security,
                   proto::GrpcSecurityFromSettings(s, proto::GrpcRole::kClient));
  if (security.plaintext) {
    absl::FPrintF(stderr, "gravacctl: warning: plain text without authentication "
                          "(--insecure_plaintext)\n");
  }
  grpc::ChannelArguments channel_args;
  proto::AddChannelArguments(security, &channel_args);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, proto::ChannelCredentials(security), channel_args);
  auto stub = gravac::v1::Controller::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(timeout_s)));
  if (args[0] == "jobs") {
    gravac::v1::JobList list;
    grpc::Status rpc = stub->ListJobs(&ctx, gravac::v1::ListJobsRequest(), &list);
    if (!rpc.ok()) {
      return proto::FromGrpcStatus(
          rpc, absl::StrFormat("jobs from controller %s%s", address,
                               NeverReady(*channel, rpc) ? proto::ConnectHint(security) : ""));
    }
    return Print(json, list, FormatJobsTable(list));
  }
  gravac::v1::GetJobStatusRequest request;
  ASSIGN_OR_RETURN(*request.mutable_job_name(), s.GetString("job"));
  ASSIGN_OR_RETURN(*request.mutable_run_id(), s.GetString("run_id"));
  gravac::v1::JobStatus status;
  grpc::Status rpc = stub->GetJobStatus(&ctx, request, &status);
  if (!rpc.ok()) {
    return proto::FromGrpcStatus(
        rpc, absl::StrFormat("status from controller %s%s", address,
                             NeverReady(*channel, rpc) ? proto::ConnectHint(security) : ""));
  }
  return Print(json, status, FormatStatusTable(status));
}

}  // namespace
}  // namespace gravac::ctl

int main(int argc, char** argv) {
  using gravac::Settings;
  namespace c = gravac::ctl;
  std::vector<const char*> args(argv + 1, argv + argc);
  const std::vector<gravac::SettingSpec> table = c::Table();
  absl::StatusOr<Settings> settings = Settings::Parse(table, args, gravac::ProcessEnvironment());
  if (settings.ok() && settings->help_requested()) {
    std::fputs(c::kUsage, stdout);
    std::fputs(Settings::Help(table, "gravacctl").c_str(), stdout);
    return 0;
  }
  absl::Status status = settings.ok() ? c::Main(*settings) : settings.status();
  if (!status.ok()) {
    absl::FPrintF(stderr, "gravacctl: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

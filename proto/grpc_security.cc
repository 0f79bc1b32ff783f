#include "proto/grpc_security.h"

#include <errno.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/absl_compat.h"
#include "core/errno_status.h"
#include "core/status.h"
#include "grpc/grpc_security_constants.h"

namespace gravac::proto {
namespace {

// The whole of a PEM file, checked to hold at least one PEM block.
absl::StatusOr<std::string> ReadPem(std::string_view setting, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ErrnoStatus(errno, absl::StrFormat("--%s: cannot read '%s'", setting, path));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s: '%s' is not a PEM file (no -----BEGIN line)", setting, path));
  }
  return pem;
}

}  // namespace

absl::StatusOr<GrpcSecurity> GrpcSecurityFromFiles(const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& ca_file, GrpcRole role) {
  const bool needs_cert = role != GrpcRole::kClient;
  if (ca_file.empty() || (needs_cert && (cert_file.empty() || key_file.empty()))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no TLS credentials for the control plane: pass %s (GRAVAC_TLS_*), or "
                        "--insecure_plaintext to run without authentication",
                        needs_cert ? "--tls_cert, --tls_key and --tls_ca"
                                   : "--tls_ca (and --tls_cert, --tls_key)"));
  }
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both or neither");
  }
  GrpcSecurity s;
  ASSIGN_OR_RETURN(s.ca_pem, ReadPem("tls_ca", ca_file));
  if (!cert_file.empty()) {
    ASSIGN_OR_RETURN(s.cert_pem, ReadPem("tls_cert", cert_file));
    ASSIGN_OR_RETURN(s.key_pem, ReadPem("tls_key", key_file));
    s.origin = absl::StrFormat("mutual TLS (certificate %s, CA %s)", cert_file, ca_file);
  } else {
    s.origin = absl::StrFormat("TLS without a client certificate (CA %s)", ca_file);
  }
  return s;
}

absl::StatusOr<GrpcSecurity> GrpcSecurityFromSettings(const Settings& settings, GrpcRole role) {
  ASSIGN_OR_RETURN(bool plaintext, settings.GetBool("insecure_plaintext"));
  ASSIGN_OR_RETURN(std::string cert, settings.GetString("tls_cert"));
  ASSIGN_OR_RETURN(std::string key, settings.GetString("tls_key"));
  ASSIGN_OR_RETURN(std::string ca, settings.GetString("tls_ca"));
  std::string server_name;
  if (role != GrpcRole::kServer) {
    ASSIGN_OR_RETURN(server_name, settings.GetString("tls_server_name"));
  }
  if (plaintext) {
    if (!cert.empty() || !key.empty() || !ca.empty()) {
      return absl::InvalidArgumentError(
          "--insecure_plaintext and --tls_cert / --tls_key / --tls_ca contradict each other: "
          "give one or the other");
    }
    return GrpcSecurity::Plaintext();
  }
  ASSIGN_OR_RETURN(GrpcSecurity s, GrpcSecurityFromFiles(cert, key, ca, role));
  s.server_name = std::move(server_name);
  return s;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const GrpcSecurity& security,
                                                           bool client_cert_optional) {
  if (security.plaintext) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      client_cert_optional ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                           : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const GrpcSecurity& security) {
  if (security.plaintext) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.ca_pem;
  options.pem_private_key = security.key_pem;
  options.pem_cert_chain = security.cert_pem;
  return grpc::SslCredentials(options);
}

void AddChannelArguments(const GrpcSecurity& security, grpc::ChannelArguments* args) {
  if (!security.plaintext && !security.server_name.empty()) {
    args->SetSslTargetNameOverride(security.server_name);
  }
}

std::vector<std::string> PeerNames(const grpc::AuthContext& context) {
  std::vector<std::string> names;
  if (!context.IsPeerAuthenticated()) return names;
  for (const char* property : {GRPC_X509_CN_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME,
                               GRPC_PEER_URI_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : context.FindPropertyValues(property)) {
      std::string name(value.data(), value.size());
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

absl::Status CheckPeerIsNamed(const GrpcSecurity& security, const grpc::AuthContext& context,
                              std::string_view name, std::string_view what) {
  if (security.plaintext) return absl::OkStatus();
  std::vector<std::string> names = PeerNames(context);
  if (names.empty()) {
    return absl::UnauthenticatedError(
        absl::StrFormat("%s refused: the client presented no certificate", what));
  }
  if (std::find(names.begin(), names.end(), name) != names.end()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrFormat("%s refused: the client's certificate names %s, not '%s'", what,
                      absl::StrJoin(names, ", "), name));
}

std::string ConnectHint(const GrpcSecurity& security) {
  return absl::StrFormat(
      " (this end uses %s; a controller using the other mode, or one that refuses this "
      "certificate, closes the connection: check --insecure_plaintext and the certificates on "
      "both ends)",
      security.plaintext ? "plain text" : "TLS");
}

}  // namespace gravac::proto

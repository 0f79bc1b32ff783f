// GrpcSecurity: how one end of the control plane (gravac-controller serving; gravacd and gravacctl
// dialling it) secures its gRPC connections, parsed from the settings of core/tls_settings.h, and
// the gRPC credentials and peer identities it yields.
//
// Mutual TLS: every connection presents a certificate signed by the CA of --tls_ca and checks the
// other end's. The controller knows a daemon by the names its certificate carries (PeerNames: the
// subject CN and the DNS / URI subject alternative names) and accepts it only as the node of that
// name (controller/controller_service.cc). Plain text is an explicit choice (--insecure_plaintext);
// without it and without certificates a binary refuses to start.
//
// Thread-safety: stateless functions over immutable values.
#ifndef GRAVAC_PROTO_GRPC_SECURITY_H_
#define GRAVAC_PROTO_GRPC_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/settings.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/auth_context.h"

namespace gravac::proto {

// Who uses the settings: what is required differs.
enum class GrpcRole {
  kServer,      // gravac-controller: certificate, key and CA
  kNodeClient,  // gravacd: certificate, key and CA (its certificate names its node)
  kClient,      // gravacctl: CA; a certificate and key unless the controller serves status openly
};

struct GrpcSecurity {
  bool plaintext = false;
  // PEM text (not paths): read once at start, so a file that disappears later changes nothing.
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  std::string server_name;  // clients: expected name in the server's certificate; "" = target host
  std::string origin;       // for messages: "TLS (cert /x.crt)" or "plain text"

  // Plain text, for in-process tests of the logic behind the service (not a default of binaries).
  static GrpcSecurity Plaintext() {
    GrpcSecurity s;
    s.plaintext = true;
    s.origin = "plain text";
    return s;
  }
};

// Reads tls_cert, tls_key, tls_ca and insecure_plaintext (and, for clients, tls_server_name)
// from parsed settings and loads the PEM files. InvalidArgument naming the setting when
// certificates are missing without --insecure_plaintext, when both are given, or when a file is
// not PEM; NotFound / PermissionDenied naming a file that cannot be read.
absl::StatusOr<GrpcSecurity> GrpcSecurityFromSettings(const Settings& settings, GrpcRole role);

// Loads PEM files into a GrpcSecurity (the same checks; for code without a Settings).
absl::StatusOr<GrpcSecurity> GrpcSecurityFromFiles(const std::string& cert_file,
                                                   const std::string& key_file,
                                                   const std::string& ca_file, GrpcRole role);

// Server credentials: TLS that requires (or, with `client_cert_optional`, only requests) a client
// certificate signed by the CA, and verifies any certificate presented; or insecure.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const GrpcSecurity& security,
                                                           bool client_cert_optional);

// Channel credentials (TLS with this process's certificate when it has one; or insecure) and
// the channel arguments they need (the expected server name when set).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const GrpcSecurity& security);
void AddChannelArguments(const GrpcSecurity& security, grpc::ChannelArguments* args);

// The names a verified peer certificate carries: its subject CN and its DNS / URI subject
// alternative names, without duplicates. Empty for a peer without a verified certificate
// (plain text, or a TLS client that sent none).
std::vector<std::string> PeerNames(const grpc::AuthContext& context);

// Whether the peer holds a certificate naming `name`. OK, or PermissionDenied naming `what`
// (e.g. "Join as node 'node1'") and the names the certificate carries, or Unauthenticated when the
// peer presented no certificate. Always OK with plain-text security.
absl::Status CheckPeerIsNamed(const GrpcSecurity& security, const grpc::AuthContext& context,
                              std::string_view name, std::string_view what);

// A hint appended to a failed call's message when the controller could not be reached: a
// server in the other mode (TLS / plain text), or one that refuses this certificate, closes
// the connection, which gRPC reports as UNAVAILABLE / DEADLINE_EXCEEDED without the reason.
std::string ConnectHint(const GrpcSecurity& security);

}  // namespace gravac::proto

#endif  // GRAVAC_PROTO_GRPC_SECURITY_H_

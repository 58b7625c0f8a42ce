// TLS files read and checked before gRPC sees them: gRPC takes PEM text as it is, and a key that
// does not match its certificate, a key given as the certificate, or a file of something else
// fails later as "cannot listen" (a daemon) or "empty address list" (a client), after the TLS
// library has logged lines of its own. These say which file holds what.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kprof::base {

struct TlsPair {
  std::string cert_pem;  // the certificate chain, leaf first
  std::string key_pem;   // its private key
};

// Reads `cert_path` (a PEM certificate chain) and `key_path` (its PEM private key) and checks
// them: the first holds a certificate, the second an unencrypted private key, the key is the
// certificate's, and the certificate has not expired. An error names the option (`cert_option`,
// "--tls-cert") and the files; when the files look swapped it says so.
absl::StatusOr<TlsPair> ReadTlsPair(const std::string& cert_path, const std::string& key_path,
                                    const std::string& cert_option = "--tls-cert",
                                    const std::string& key_option = "--tls-key");

// Reads `path`, which must hold at least one PEM certificate (a CA's, to verify the other side
// with); an error names `option` and the file.
absl::StatusOr<std::string> ReadCertificates(const std::string& path, const std::string& option);

}  // namespace kprof::base

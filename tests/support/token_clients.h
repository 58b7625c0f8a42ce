// Clients told apart by their tokens' labels (what a daemon counts as a client): a token file
// of `count` of them, "token-I" labelled "client-I", for a daemon's --token-file, and a client
// connected with token I.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/kprof_client.h"

namespace kprof::testing {

// DIR/tokens, written; its path.
inline std::string WriteTokenFile(const std::string& dir, int count) {
  const std::string path = dir + "/tokens";
  std::ofstream tokens(path);
  tokens << "# token, then the client's label\n";
  for (int i = 0; i < count; ++i) tokens << "token-" << i << " client-" << i << "\n";
  return path;
}

// A client sending `token` (and, when given, making its calls under lease `lease`).
inline absl::StatusOr<std::unique_ptr<client::Client>> ConnectWithToken(
    const std::string& target, const std::string& token, const std::string& lease = "") {
  client::ClientOptions options;
  options.bearer_token = token;
  options.lease = lease;
  options.timeout = absl::Seconds(30);
  return client::Client::Connect(target, options);
}

inline absl::StatusOr<std::unique_ptr<client::Client>> ConnectAs(const std::string& target, int i) {
  return ConnectWithToken(target, "token-" + std::to_string(i));
}

}  // namespace kprof::testing

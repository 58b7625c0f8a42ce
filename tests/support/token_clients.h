// Clients told apart by their tokens' labels (what a daemon counts as a client): a token file
// of `count` of them, "token-I" labelled "client-I", for a daemon's --token-file, and a client
// connected with token I.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
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

inline absl::StatusOr<std::unique_ptr<client::Client>> ConnectAs(const std::string& target, int i) {
  client::ClientOptions options;
  options.bearer_token = "token-" + std::to_string(i);
  return client::Client::Connect(target, options);
}

}  // namespace kprof::testing

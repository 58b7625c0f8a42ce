// TokenAuth: bearer-token authentication of calls ("authorization: Bearer <token>").
//
// Tokens are held only as SHA-256 digests and compared in constant time, digest against
// digest, so neither a token's bytes nor its length leak through timing. No token is ever
// logged or echoed in an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::server {

class TokenAuth {
 public:
  // Reads one token per line from `path` (blank lines and # comments skipped).
  // INVALID_ARGUMENT when the file holds no token; NOT_FOUND when it cannot be read.
  static absl::StatusOr<TokenAuth> FromFile(const std::string& path);

  // OK when `authorization` (the header's value, absent: nullptr) carries a known token;
  // UNAUTHENTICATED otherwise, saying what is expected.
  absl::Status Check(const std::string_view* authorization) const;

  size_t size() const { return digests_.size(); }

 private:
  std::vector<std::string> digests_;  // raw 32-byte SHA-256 digests
};

}  // namespace kprof::server

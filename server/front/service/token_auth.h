// TokenAuth: bearer-token authentication of calls ("authorization: Bearer <token>").
//
// Tokens are held only as SHA-256 digests and compared in constant time, digest against
// digest, so neither a token's bytes nor its length leak through timing. No token is ever
// logged or echoed in an error.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::server {

// Who a client is: the label of the token it presented. A line of the token file is a token,
// optionally followed by whitespace and the label of whoever holds it ("s3cret alice"); a
// token without one is labelled by its digest's first 8 hex digits. Several tokens may share a
// label (one client rotating its tokens). A last word "weight=N" gives the label's share of each
// device against other clients' ("s3cret tuner-a weight=3"; default 1).
class TokenAuth {
 public:
  // Reads one token per line from `path` (blank lines and # comments skipped).
  // INVALID_ARGUMENT when the file holds no token, or a label is not printable or longer than
  // kMaxLabelBytes; NOT_FOUND when it cannot be read.
  static absl::StatusOr<TokenAuth> FromFile(const std::string& path);

  // The label of the known token `authorization` carries (the header's value, absent:
  // nullptr); UNAUTHENTICATED otherwise, saying what is expected.
  absl::StatusOr<std::string> Check(const std::string_view* authorization) const;

  size_t size() const { return tokens_.size(); }

  // The weight of a client's label (1 for a label without one, or unknown).
  int WeightOf(const std::string& label) const;

  static constexpr size_t kMaxLabelBytes = 64;
  static constexpr int kMaxWeight = 1000;

 private:
  struct Token {
    std::string digest;  // raw 32-byte SHA-256 digest
    std::string label;
    bool explicit_label = false;  // given in the file, not made from the digest
  };
  std::vector<Token> tokens_;
  std::map<std::string, int> weights_;  // by label
};

}  // namespace kprof::server

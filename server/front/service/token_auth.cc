#include "server/front/service/token_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/read_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/modules/module_format.h"

namespace kprof::server {
namespace {

std::string Digest(std::string_view token) {
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

}  // namespace

absl::StatusOr<TokenAuth> TokenAuth::FromFile(const std::string& path) {
  KPROF_ASSIGN_OR_RETURN(const std::string contents, base::ReadFile(path, "token file"));
  TokenAuth auth;
  int number = 0;
  for (const absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++number;
    const std::string text(absl::StripAsciiWhitespace(line));
    if (text.empty() || text[0] == '#') continue;
    const size_t space = text.find_first_of(" \t");
    const std::string token = text.substr(0, space);
    std::string label = space == std::string::npos
                            ? std::string()
                            : std::string(absl::StripAsciiWhitespace(text.substr(space)));
    // A last word "weight=N": the client's share of each device against others' (default 1).
    int weight = 0;  // none given
    if (const size_t last = label.find_last_of(" \t");
        absl::StartsWith(label.substr(last == std::string::npos ? 0 : last + 1), "weight=")) {
      const std::string word = label.substr(last == std::string::npos ? 0 : last + 1);
      if (!absl::SimpleAtoi(word.substr(7), &weight) || weight < 1 || weight > kMaxWeight) {
        return absl::InvalidArgumentError(
            absl::StrCat("the token file '", path, "', line ", number, ": '", word,
                         "' is not a weight (accepted: weight=N, N from 1 to ", kMaxWeight, ")"));
      }
      label = last == std::string::npos
                  ? std::string()
                  : std::string(absl::StripAsciiWhitespace(label.substr(0, last)));
    }
    if (!core::IsPrintableUtf8(label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token file '", path, "', line ", number,
                       ": a label may not hold control characters and must be UTF-8 (a line "
                       "is: TOKEN [LABEL])"));
    }
    if (label.size() > kMaxLabelBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the token file '", path, "', line ", number,
                                                     ": the label is ", label.size(),
                                                     " bytes; at most ", kMaxLabelBytes));
    }
    Token entry{Digest(token), std::move(label)};
    for (const Token& earlier : auth.tokens_) {
      if (earlier.digest == entry.digest) {
        return absl::InvalidArgumentError(absl::StrCat("the token file '", path, "', line ", number,
                                                       ": this token is listed already"));
      }
    }
    entry.explicit_label = !entry.label.empty();
    if (entry.label.empty()) entry.label = base::ToHex(entry.digest.substr(0, 4));
    // A label's tokens may give its weight once or each the same; a token without one
    // (rotating in) takes the label's.
    if (weight > 0) {
      if (const auto [known, added] = auth.weights_.emplace(entry.label, weight);
          !added && known->second != weight) {
        return absl::InvalidArgumentError(
            absl::StrCat("the token file '", path, "', line ", number, ": the label '", entry.label,
                         "' has weight ", known->second, " on an earlier line; give one weight"));
      }
    }
    auth.tokens_.push_back(std::move(entry));
  }
  // A label that spells another token's digest label would make two clients one.
  for (const Token& named : auth.tokens_) {
    for (const Token& unnamed : auth.tokens_) {
      if (named.explicit_label && !unnamed.explicit_label && named.label == unnamed.label) {
        return absl::InvalidArgumentError(
            absl::StrCat("the token file '", path, "': the label '", named.label,
                         "' is also the label of a token without one (its digest's first 8 hex "
                         "digits); choose another"));
      }
    }
  }
  if (auth.tokens_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file '", path, "' holds no token (one per line)"));
  }
  return auth;
}

absl::StatusOr<std::string> TokenAuth::Check(const std::string_view* authorization) const {
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "no credentials: this kprofd wants 'authorization: Bearer <token>' (kprof --token-file)");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization->substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization header is not 'Bearer <token>'");
  }
  const std::string digest = Digest(authorization->substr(kBearer.size()));
  const Token* known = nullptr;
  for (const Token& expected : tokens_) {  // no early exit: time does not tell which
    if (CRYPTO_memcmp(expected.digest.data(), digest.data(), digest.size()) == 0) {
      known = &expected;
    }
  }
  if (known == nullptr) return absl::UnauthenticatedError("wrong bearer token");
  return known->label;
}

int TokenAuth::WeightOf(const std::string& label) const {
  const auto it = weights_.find(label);
  return it == weights_.end() ? 1 : it->second;
}

}  // namespace kprof::server

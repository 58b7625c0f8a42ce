// Which daemons a farm target names: "dns:///name:port" (every address the name resolves to),
// or addresses separated by commas ("a:9177,b:9177", "ipv4:..." and "ipv6:..." as gRPC spells
// them).
#include <netdb.h>
#include <sys/socket.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/farm.h"

namespace kprof::client {
namespace {

// "host:port" -> host and port; the host may be [an IPv6 address].
absl::Status SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  if (address.find("://") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", address, "' is a URL; a target is HOST:PORT (e.g. kprofd.lab:9177, [::1]:9177)"));
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not HOST:PORT (e.g. kprofd.lab:9177, [::1]:9177)"));
  }
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return absl::OkStatus();
}

// Every address `name` resolves to, as the system resolver (the one gRPC's native DNS resolver
// uses) gives them.
absl::StatusOr<std::vector<std::string>> ResolveDns(const std::string& address) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int r = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); r != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(r)));
  }
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST] = {0};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) !=
        0) {
      continue;
    }
    const std::string one = a->ai_family == AF_INET6 ? absl::StrCat("[", text, "]:", port)
                                                     : absl::StrCat(text, ":", port);
    if (seen.insert(one).second) addresses.push_back(one);
  }
  freeaddrinfo(found);
  if (addresses.empty()) return absl::NotFoundError(absl::StrCat("'", host, "' has no address"));
  return addresses;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveTarget(const std::string& target) {
  std::string rest = target;
  if (absl::StartsWith(rest, "dns:")) {
    rest = rest.substr(4);
    if (absl::StartsWith(rest, "//")) {  // dns://[authority]/host:port
      const size_t slash = rest.find('/', 2);
      if (slash == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("'", target, "' is not dns:///HOST:PORT"));
      }
      rest = rest.substr(slash + 1);
    }
    return ResolveDns(rest);
  }
  for (const char* scheme : {"ipv4:", "ipv6:"}) {
    if (absl::StartsWith(rest, scheme)) rest = rest.substr(5);
  }
  std::vector<std::string> addresses;
  for (const absl::string_view part : absl::StrSplit(absl::string_view(rest), ',')) {
    const std::string address(part);
    std::string host, port;
    if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) return s;
    addresses.push_back(address);
  }
  return addresses;
}

}  // namespace kprof::client

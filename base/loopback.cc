#include "base/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace kprof::base {

bool IsLoopbackAddress(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host == "localhost") return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
  }
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace kprof::base
